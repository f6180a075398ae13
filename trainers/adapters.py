"""Named policies in one learner: a LoRA adapter per policy on the frozen shared base.

A run that names its policies (``policies`` and ``seat_policies`` in the run config) trains
one adapter per policy (:mod:`arena.models.lora`) and no base weight. Every adapter is trained
in the same step: each turn's rows go through its seat's adapter (``Sample.adapter``), so a
micro-batch may mix adapters, and a gradient reaches only the adapter that played the turn.

- **Optimizer state** is per parameter (AdamW), so each adapter has its own moments; gradients
  are clipped per adapter (``optim.grad_clip`` each), so one policy's large step does not shrink
  another's.
- **The KL reference** is the base itself: the same model with no adapter routed, at no cost.
- **Weight updates** carry the adapters only, one buffer each (every layer's pair is a view of
  it), never the base: 9.8 MB per adapter for SmolLM2-135M at r = 8 on every projection, against
  651 MB for the full model (``bench/adapters.py``).
- **Checkpoints** hold each adapter as a peft directory, ``adapters/<name>/``, beside the base
  in ``model/``; a resumed learner loads them, and ``arena eval --adapter`` plays them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from arena.core.errors import ConfigError
from arena.models.adapter_shape import AdapterShape
from arena.models.lora import (
    adapter_buffers,
    adapter_names,
    adapter_parameters,
    add_adapters,
    load_adapter_state,
)
from arena.models.lora_files import read_adapter, save_adapter
from trainers.batch import Sample
from trainers.checkpoint_dirs import ADAPTERS_DIR
from trainers.config import LearnerConfig


class NamedAdapters:
    """The trained adapters of a learner with named policies (see the module docstring)."""

    def __init__(self, model: nn.Module, config: LearnerConfig, resume: Path | None) -> None:
        if config.lora.enabled:
            raise ConfigError(
                "learner.lora.enabled trains one peft adapter for the shared policy; named "
                "policies (learner.adapters) train one adapter each: use one or the other"
            )
        self.model = model
        self.base = config.model
        self.names = list(config.adapters)
        for param in model.parameters():
            param.requires_grad_(False)
        shape = AdapterShape.of(config.lora)
        for name, path in config.adapters.items():
            source = resume / ADAPTERS_DIR / name if resume is not None else None
            if source is None and path:
                source = Path(path)
            state: Mapping[str, torch.Tensor] | None = None
            if source is not None:
                shape, state = read_adapter(source, self.base)
            add_adapters(model, [name], shape, seed=config.seed)
            if state is not None:
                load_adapter_state(model, name, state)
        self.clip = config.optim.grad_clip
        self._exported: dict[str, torch.Tensor] = {}
        """Each adapter's buffer as last exported (what a delta is taken against)."""

    def parameters(self, name: str) -> list[nn.Parameter]:
        return adapter_parameters(self.model, name)

    def clip_gradients(self) -> dict[str, float]:
        """Clip each adapter's gradient to ``optim.grad_clip`` alone; each one's norm before."""
        clip = self.clip if self.clip > 0 else math.inf
        norms = {}
        for name in self.names:
            grads = [p for p in self.parameters(name) if p.grad is not None]
            norms[name] = float(torch.nn.utils.clip_grad_norm_(grads, clip)) if grads else 0.0
        return norms

    def export(
        self, changed_only: bool = False, on_device: bool = False
    ) -> dict[str, torch.Tensor]:
        """CPU copies of the adapters' buffers (``lora_adapter.<name>``, one tensor each): what a
        weight update carries, never the frozen base. ``changed_only``: only those that differ
        from their last export (a delta update; an adapter whose seat played no trained turn
        does not change)."""
        out = {}
        for name, flat in adapter_buffers(self.model).items():
            # one copy, compared and sent (on_device: on the GPU, for a CUDA IPC publish)
            current = flat.detach().clone() if on_device else flat.detach().to("cpu", copy=True)
            last = self._exported.get(name)
            if changed_only and last is not None and torch.equal(last.to(current.device), current):
                continue
            out[name] = self._exported[name] = current
        return out

    def save(self, checkpoint: Path) -> None:
        """Each adapter as a peft directory under ``checkpoint/adapters/<name>``."""
        for name in adapter_names(self.model):
            save_adapter(checkpoint / ADAPTERS_DIR / name, self.model, name, base=self.base)


def sort_by_adapter(
    samples: list[Sample], names: list[str]
) -> tuple[list[Sample], list[Sample], dict[str, float]]:
    """The samples a learner training ``names`` can train (all of them without named
    policies: then every turn must come from the base), the ones it cannot, and metrics per
    policy: ``policy/<name>/turns`` and ``policy/<name>/return``, the mean turn return."""
    known = set(names)
    fits: list[Sample] = []
    misfits: list[Sample] = []
    for sample in samples:
        trainable = sample.adapter in known if known else sample.adapter is None
        (fits if trainable else misfits).append(sample)
    metrics: dict[str, float] = {}
    for name in names:
        returns = [s.ret for s in fits if s.adapter == name]
        metrics[f"policy/{name}/turns"] = float(len(returns))
        if returns:
            metrics[f"policy/{name}/return"] = float(sum(returns) / len(returns))
    return fits, misfits, metrics
