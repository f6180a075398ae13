"""LoRA adapters for the tiny model, written as peft directories, for the adapter tests."""

from __future__ import annotations

from pathlib import Path

import torch

from arena.models import tiny_model
from arena.models.adapter_shape import AdapterShape
from arena.models.lora import adapter_parameters, add_adapters
from arena.models.lora_files import save_adapter


def make_adapter(path: Path, *, base: str = "tiny", seed: int = 0, noise: float = 2.0) -> Path:
    """An adapter on ``tiny_model(seed=0)`` saved at ``path`` as made for ``base``, its A and
    B moved by ``noise`` (a fresh adapter's B is zero, so it would play exactly as the base):
    adapters of two seeds play unlike the base and unlike each other (at 0.5, two seeds' greedy
    Tic-Tac-Toe choices were the base's on the tiny model's heads of 32)."""
    model, _ = tiny_model(seed=0)
    add_adapters(model, [path.name], AdapterShape(r=4, alpha=8.0))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in adapter_parameters(model, path.name):
            param.add_(torch.randn(param.shape, generator=generator) * noise)
    return save_adapter(path, model, path.name, base=base)
