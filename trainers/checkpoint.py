"""Atomic, pickle-free checkpoints.

Layout of ``<dir>/step-00000042/`` (one directory per saved step)::

    model/                 HF directory: config.json, model.safetensors, tokenizer (LoRA merged)
    adapter.safetensors    LoRA only: the adapter weights (peft names), for resuming
    optimizer.safetensors  every tensor of the optimizer state, keyed "state/<param fqn>/<name>"
    optimizer.json         the rest of the optimizer state (param groups, scalars)
    rng.safetensors        torch CPU (and CUDA) generator states
    state.json             step, version, EMA baselines, counters, recent episode ids,
                           numpy and python RNG states, the config

A checkpoint is written into ``<dir>/.tmp-step-...``, flushed to disk, then renamed into place
in one ``os.rename``: a directory named ``step-*`` is complete, and a crash (even ``kill -9``)
mid-write leaves only a temporary directory, removed by the next save. A step saved again
(the final checkpoint after the last step's) is swapped in by one ``renameat2`` exchange, so
no moment lacks it (where the system has no such swap, two renames).

Disk space: a full checkpoint takes about 12 bytes per weight (the weights in float32, and
Adam's two float32 moments of each trained weight: 1.7 GB on disk for the 135M default model), and
``keep`` of them stay, plus the one being written. :func:`check_space` says so before training
starts; a save that still runs out of space raises :class:`CheckpointSpaceError`, removes its
temporary directory and leaves the earlier checkpoints as they were.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from arena.core.errors import CannotStart
from trainers.checkpoint_dirs import incomplete_after as incomplete_after
from trainers.checkpoint_dirs import latest_checkpoint as latest_checkpoint
from trainers.checkpoint_dirs import list_checkpoints as list_checkpoints
from trainers.checkpoint_dirs import step_dir_name

_TMP_PREFIX = ".tmp-"
_GB = 1e9


def _size(nbytes: float) -> str:
    return f"{nbytes / _GB:.1f} GB" if nbytes >= 0.1 * _GB else f"{nbytes / 1e6:.1f} MB"


class CheckpointSpaceError(OSError, CannotStart):
    """The checkpoint directory's disk cannot hold the checkpoints the run will write (an
    ``arena`` command exits with :data:`~arena.core.errors.EXIT_REFUSED` on it, and is not
    restarted: it would fail the same way)."""


def checkpoint_bytes(total_params: int, trained_params: int) -> int:
    """About the size of one checkpoint: every weight in float32 (the HF model directory) and
    two float32 Adam moments per trained weight (optimizer.safetensors)."""
    return 4 * total_params + 8 * trained_params


def check_space(root: str | os.PathLike[str], one: int, keep: int) -> str | None:
    """Before training: raise :class:`CheckpointSpaceError` if ``root``'s disk cannot hold even
    one checkpoint of ``one`` bytes; return a warning if it cannot hold ``keep`` of them plus
    the one being written (``keep`` 0 keeps every checkpoint: one more is asked for); else None."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if free < one:
        raise CheckpointSpaceError(
            errno.ENOSPC,
            f"{root} has {_size(free)} free and one checkpoint takes about "
            f"{_size(one)}: free some space, or set output_dir (arena train) or "
            "checkpoint.dir to a larger disk",
        )
    copies = (keep or 1) + 1
    if free < copies * one:
        return (
            f"{root} has {_size(free)} free, and {copies} checkpoints of about "
            f"{_size(one)} each may be on disk at once (checkpoint.keep={keep}, plus the "
            "one being written): a save may run out of space; lower checkpoint.keep or free space"
        )
    return None


def _fsync_tree(path: Path) -> None:
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _out_of_space(err: BaseException) -> bool:
    # safetensors reports a full disk as a SafetensorError, not an OSError: "... I/O error: No
    # space left on device (os error 28)"
    if isinstance(err, OSError):
        return err.errno == errno.ENOSPC
    return "No space left on device" in str(err)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap directories ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system or the file system cannot. A step is saved again (the final
    checkpoint after the last step's, a resumed run's) by such a swap: moving the complete copy
    aside and the new one in, two renames, left no ``step-N`` at all to a kill between them,
    and a learner restarted then resumed from an older checkpoint (none, with
    ``checkpoint.keep: 1``)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def write_atomically(
    root: str | os.PathLike[str], step: int, write: Callable[[Path], None], keep: int = 0
) -> Path:
    """Run ``write(tmp_dir)``, then rename it to ``root/step-NNNNNNNN``; keep the newest
    ``keep`` checkpoints (0 keeps all). Returns the final path."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f"{_TMP_PREFIX}*"):  # left by a crash; nobody else writes here
        shutil.rmtree(stale, ignore_errors=True)
    final = root / step_dir_name(step)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{final.name}-", dir=root))
    try:
        write(tmp)
        _fsync_tree(tmp)
        if final.exists() and _exchange(tmp, final):  # re-saving a step: one atomic swap
            shutil.rmtree(tmp, ignore_errors=True)  # the old copy, now
        elif final.exists():  # no atomic swap on this system: two renames
            old = root / f"{_TMP_PREFIX}old-{final.name}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _out_of_space(err):
            raise
        free = _size(shutil.disk_usage(root).free)
        raise CheckpointSpaceError(
            errno.ENOSPC,
            f"no space left on the disk of {root} while saving {final.name} ({free} free "
            "after removing the partial copy; the earlier checkpoints are intact): free space "
            "and resume the run, or lower checkpoint.keep",
        ) from err
    if keep > 0:
        for _, path in list_checkpoints(root)[:-keep]:
            shutil.rmtree(path, ignore_errors=True)
    return final


# -- JSON with tuples ------------------------------------------------------------------------
def _to_json(value: Any) -> Any:
    if isinstance(value, tuple):
        return {"__tuple__": [_to_json(v) for v in value]}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(_from_json(v) for v in value["__tuple__"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def save_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(_to_json(value), indent=1, sort_keys=True))


def load_json(path: Path) -> Any:
    return _from_json(json.loads(path.read_text()))


# -- optimizer state -------------------------------------------------------------------------
def save_optimizer(path: Path, state: dict[str, Any]) -> None:
    """Split a (parameter-name keyed) optimizer state dict into safetensors and JSON."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for param, entries in state["state"].items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state/{param}/{name}"] = value.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(param), {})[name] = value
    save_file(tensors, str(path / "optimizer.safetensors"))
    save_json(path / "optimizer.json", {"param_groups": state["param_groups"], "scalars": scalars})


def load_optimizer(path: Path) -> dict[str, Any]:
    meta = load_json(path / "optimizer.json")
    state: dict[str, dict[str, Any]] = {p: dict(v) for p, v in meta["scalars"].items()}
    for key, tensor in load_file(str(path / "optimizer.safetensors")).items():
        _, rest = key.split("/", 1)
        param, name = rest.rsplit("/", 1)
        state.setdefault(param, {})[name] = tensor
    return {"state": state, "param_groups": meta["param_groups"]}


# -- RNG states ------------------------------------------------------------------------------
def capture_rng() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Torch (CPU, CUDA) generator states as tensors; numpy and python states as JSON."""
    tensors = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, st in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch_cuda_{i}"] = st
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    rest = {"numpy": [kind, keys.tolist(), pos, has_gauss, gauss], "python": random.getstate()}
    return tensors, rest


def restore_rng(tensors: dict[str, torch.Tensor], rest: dict[str, Any]) -> None:
    torch.set_rng_state(tensors["torch_cpu"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("torch_cuda_")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda[: torch.cuda.device_count()])
    kind, keys, pos, has_gauss, gauss = rest["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = rest["python"]
    random.setstate((version, tuple(internal), gauss_next))


def save_rng(path: Path) -> dict[str, Any]:
    """Write rng.safetensors; return the JSON part for state.json."""
    tensors, rest = capture_rng()
    save_file(tensors, str(path / "rng.safetensors"))
    return rest


def load_rng(path: Path, rest: dict[str, Any]) -> None:
    restore_rng(load_file(str(path / "rng.safetensors")), rest)


# -- a learner checkpoint --------------------------------------------------------------------
def save_training(
    root: str | os.PathLike[str],
    keep: int,
    state: dict[str, Any],
    optimizer: dict[str, Any],
    write_model: Callable[[Path], None],
    adapter: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write a learner checkpoint (the layout above) atomically under ``root`` at
    ``state["step"]``: ``write_model(dir)`` writes the HF model directory, the RNG states are
    captured now, and ``state`` (JSON) goes to state.json."""

    def write(tmp: Path) -> None:
        write_model(tmp / "model")
        if adapter is not None:
            save_file(adapter, str(tmp / "adapter.safetensors"))
        save_optimizer(tmp, optimizer)
        save_json(tmp / "state.json", {**state, "rng": save_rng(tmp)})

    return write_atomically(root, state["step"], write, keep)


def load_training(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The optimizer state and state.json of a learner checkpoint; restores the RNG states."""
    saved = load_json(path / "state.json")
    load_rng(path, saved["rng"])
    return load_optimizer(path), saved
