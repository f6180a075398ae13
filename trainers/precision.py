"""Float32 weights whose bfloat16 copy follows the updates made to them.

Where the learner computes in bf16 (``autocast``) it keeps float32 weights and every forward
rounds them to bf16; the inference service, in bf16, holds the same rounding. An RL step moves a
weight by far less than bf16's rounding step (2^-8 of the weight), so normally the bf16 copy
changes only once updates have accumulated past half a step. Weights that sit exactly halfway
between two bf16 values break that: round-to-nearest-even settles the tie one way, and any
change, however small, settles it the other way by a whole rounding step, in the direction of
the change. The embedded SmolLM2 ships in float16, and 8% of its weights are such ties (float16
has 3 more mantissa bits than bf16), so the first update of a run moved 11 M weights by a full
bf16 step each: a sign-descent step of enormous size, whatever the learning rate
(``bench/studies/bf16_step.py``: a Kuhn step of length 5e-4 moved the bf16 policy's P(bet) by
0.46, where float32 moved it by 0.014; from weights rounded first, by 0.014).

:func:`snap_to_bfloat16` rounds the float32 weights to bf16 once, at the start of a run, where
any computation holds a bf16 copy (:func:`has_bfloat16_copy`: the learner's autocast, or a bf16
inference service beside a float32 learner). It changes no bf16 computation at that point (the
bf16 copy was that rounding already) and leaves no ties for later updates to break; a float32
computation beside it sees each weight move by at most half a bf16 step, once.
"""

from __future__ import annotations

from typing import Any

import torch

from arena.models import fast_dtype


def autocast_dtype(autocast: str | None, device: torch.device) -> str | None:
    """The autocast dtype a learner config asks for: ``auto`` resolves to ``bfloat16`` where
    this device computes it fast (:func:`arena.models.fast_dtype`), else None."""
    if autocast == "auto":
        return "bfloat16" if fast_dtype(str(device)) == "bfloat16" else None
    return autocast


def has_bfloat16_copy(autocast: str | None, sampled_in: str | None, device: torch.device) -> bool:
    """Whether some computation rounds this learner's float32 weights to bf16: its own autocast,
    or the inference service that samples with them (``LearnerConfig.sampled_in``; ``auto``:
    the service on a device like this learner's, :func:`arena.models.fast_dtype`)."""
    if sampled_in == "auto":
        sampled_in = fast_dtype(str(device))
    return autocast_dtype(autocast, device) == "bfloat16" or sampled_in == "bfloat16"


@torch.no_grad()
def snap_to_bfloat16(model: Any) -> int:
    """Round every float32 parameter of ``model`` to its nearest bf16 value (ties to even), in
    place; return how many values changed."""
    changed = 0
    for param in model.parameters():
        if param.dtype != torch.float32:
            continue
        rounded = param.to(torch.bfloat16).to(torch.float32)
        changed += int((rounded != param).sum())
        param.copy_(rounded)
    return changed
