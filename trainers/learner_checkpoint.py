"""The learner's checkpoints: what one holds, writing it (collectively), and resuming from it.

A checkpoint (:mod:`trainers.checkpoint` writes and lists them) holds the policy's weights under
transformers names in ``model/`` (and its LoRA adapter, and with named policies their adapters
in ``adapters/``), the optimizer's full state, and the learner's progress: its step, what it
trained, its counters, the EMA baseline, the episode ids it has seen and its config. Resuming
restores all of it, so that a resumed run neither repeats nor skips a step.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from arena.core.errors import CannotStart
from arena.models.adapter_shape import SHARED_ADAPTER, AdapterShape
from arena.models.lora_files import write_adapter
from trainers import checkpoint as ckpt
from trainers import distributed as ddist
from trainers.checkpoint_dirs import ADAPTERS_DIR
from trainers.config import CheckpointConfig
from trainers.optim import apply_settings
from trainers.trained_model import hf_state_dict, lora_state_dict, save_hf

log = logging.getLogger("arena.learner")
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def resume_path(config: CheckpointConfig) -> Path | None:
    """The checkpoint to resume from: the latest in ``dir`` when ``resume`` is set."""
    return ckpt.latest_checkpoint(config.dir) if config.dir and config.resume else None


def passed_by(root: str | Path, resume: Path | None) -> str | None:
    """What a resume from ``resume`` (None: the start) passes by under ``root``: incomplete
    ``step-*`` directories newer than it, named in one line; None when there are none."""
    step = int(resume.name.removeprefix("step-")) if resume is not None else -1
    skipped = ckpt.incomplete_after(root, step)
    if not skipped:
        return None
    start = resume.name if resume is not None else "the start"
    names = ", ".join(p.name for p in skipped)
    return f"resuming from {start}, past {names}: incomplete (no state.json), left as they are"


class CheckpointUnreadable(CannotStart):
    """The checkpoint to resume from cannot be read into this learner: a damaged or partial
    file, or a checkpoint of another model or config. Started again the learner would fail the
    same way, so it exits with :data:`~arena.core.errors.EXIT_REFUSED` and is not restarted."""


@contextlib.contextmanager
def reading(path: Path | None) -> Iterator[None]:
    """Turn whatever fails while resuming from the checkpoint at ``path`` into one
    :class:`CheckpointUnreadable` line that names it and the one before it (nothing when
    ``path`` is None). Running out of memory is not the checkpoint's fault and passes as it is."""
    try:
        yield
    except (MemoryError, torch.OutOfMemoryError, CannotStart):
        raise
    except Exception as err:
        if path is None:
            raise
        earlier = [p for _, p in ckpt.list_checkpoints(path.parent) if p.name < path.name]
        then = (
            f"move it out of {path.parent} to resume from {earlier[-1].name}, the one before it"
            if earlier
            else "it is the only one: start a new run"
        )
        reason = " ".join(str(err).split()) or "no message"
        raise CheckpointUnreadable(
            f"checkpoint {path} cannot be resumed from ({type(err).__name__}: {reason[:300]}); "
            f"it is damaged, or of another model or config: {then}"
        ) from err


def check_space(model: Any, config: CheckpointConfig) -> str | None:
    """Refuse to start without room for one checkpoint; a warning without room for ``keep``."""
    params = list(model.parameters())
    one = ckpt.checkpoint_bytes(
        sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)
    )
    return ckpt.check_space(config.dir, one, config.keep)


def save(learner: Any) -> Path | None:
    """Save ``learner`` (a :class:`trainers.learner.Learner`) now; collective under torchrun.
    Returns the checkpoint directory on rank 0."""
    cfg = learner.config
    if not cfg.checkpoint.dir:
        raise ValueError("checkpoint.dir is not set")
    weights = hf_state_dict(learner.model)
    adapter = lora_state_dict(learner.model) if cfg.lora.enabled else None
    optimizer = get_optimizer_state_dict(learner.policy, learner.optimizer, options=_FULL)
    if not learner.dist.is_main:
        ddist.barrier(learner.dist)
        return None
    state = {
        "step": learner.state.step,
        "samples_trained": learner.state.samples_trained,
        "tokens_trained": learner.state.tokens_trained,
        "counters": dict(learner.state.counters),
        "ema": learner.ema.state_dict(),
        "seen_episodes": learner.inbox.seen_ids(),
        "config": asdict(cfg),
    }
    path = ckpt.save_training(
        cfg.checkpoint.dir,
        cfg.checkpoint.keep,
        state,
        optimizer,
        lambda out: _write_model(learner, weights, out, adapter),
        adapter,
    )
    log.info("checkpoint %s", path)
    ddist.barrier(learner.dist)
    return path


def _write_model(
    learner: Any,
    weights: dict[str, torch.Tensor],
    out: Path,
    adapter: dict[str, torch.Tensor] | None = None,
) -> None:
    """The checkpoint's ``model/`` and, with named policies, its ``adapters/``; a shared
    policy served as an adapter keeps it there too (``adapters/shared-lora``), so that
    what reads the checkpoint in bf16 can play it unmerged, as it was served."""
    save_hf(learner.model, weights, learner.tokenizer, out)
    if learner.adapters is not None:
        learner.adapters.save(out.parent)
    if learner.serves_adapter and adapter is not None:
        shape = AdapterShape.of(learner.config.lora)
        path = out.parent / ADAPTERS_DIR / SHARED_ADAPTER
        write_adapter(path, shape, adapter, learner.config.model)


def load_training_state(learner: Any, path: Path) -> None:
    """Restore the optimizer's state and the progress of ``learner`` from the checkpoint at
    ``path`` (its weights were loaded as the model was built); the optimizer's settings stay the
    config's (a resumed run may change them)."""
    optimizer, saved = ckpt.load_training(path)
    if learner.adapters is None:
        set_optimizer_state_dict(learner.policy, learner.optimizer, optimizer, options=_FULL)
    else:
        # An adapter that has not trained yet has no saved state. Loading fills one in (a
        # zero step), which AdamW would then count as a step taken: drop it again.
        options = replace(_FULL, strict=False)
        set_optimizer_state_dict(learner.policy, learner.optimizer, optimizer, options=options)
        saved_names = set(optimizer["state"])
        for name, param in learner.policy.named_parameters():
            if param.requires_grad and name not in saved_names:
                learner.optimizer.state.pop(param, None)
    apply_settings(learner.optimizer, learner.config.optim)  # the config's, not the saved ones
    learner.state.step = saved["step"]
    learner.state.samples_trained = saved["samples_trained"]
    learner.state.tokens_trained = saved["tokens_trained"]
    learner.state.counters.update(saved["counters"])  # the inbox shares this Counter
    learner.ema.load_state_dict(saved["ema"])
    learner.inbox.load_seen_ids(saved["seen_episodes"])
