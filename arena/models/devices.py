"""Which torch device a device spec names (``auto``: the GPU where there is one)."""

from __future__ import annotations

import torch


def resolve_device(spec: str | torch.device) -> torch.device:
    """``auto`` is CUDA when there is a GPU and the CPU otherwise; anything else as torch reads it."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec)
