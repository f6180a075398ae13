"""Does a bfloat16 copy of the weights follow a reinforcement-learning step?

The learner keeps float32 weights; a bf16 sampler (``inference.dtype: bfloat16``) or a bf16
autocast learner computes with those weights rounded to bf16, whose rounding step is 2^-8 of each
weight. An RL step moves a weight by far less than that, so the rounded copy moves by whole
rounding steps in a few weights and not at all in the rest. This study measures what that does to
the policy: one policy-gradient step on Kuhn Poker (the legal-reply policy of
``bench/studies/kuhn_choose.py``: 16 self-play hands, advantages per seat, the gradient in float32),
taken at several lengths along the gradient, and after each the policy read at all 12
information states twice, with float32 matmuls and with bf16 autocast.

The step is taken twice: from the weights as loaded (the embedded model ships in float16, so 8%
of its weights lie exactly halfway between two bf16 values) and from those weights rounded to
bf16 first, as the learner now does (``trainers/precision.py``). ``<start>_shift_<compute>`` is,
per step length, the mean over information states of |P(bet) after - P(bet) before|. A bf16 copy
that followed the step would shift about as much as float32 does, and not at all for a step too
small to move any weight by half a bf16 rounding step.

Run: .venv/bin/python bench/studies/bf16_step.py [--lengths 1e-7 5e-4 2e-3 5e-3]
Ends with one JSON line. About two minutes on 2 CPU cores.

Answered in docs/learning.md, section 2, "bf16 and float16 ties" (no: a copy of the weights as
loaded jumps onto betting; rounded to bf16 first, it follows), which led to
``trainers/precision.py``; the latest figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch
from kuhn_choose import CHUNK, LegalPolicy, advantages, play


def read(policy: LegalPolicy, compute: str) -> dict[str, float]:
    """P(bet) at every information state, computed in ``compute``."""
    policy.compute_in(compute)
    return {key: probs[1] for key, probs in policy.table().items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/selfplay_text.yaml", help="run config (seat)")
    parser.add_argument("--lengths", type=float, nargs="+", default=[1e-7, 5e-4, 2e-3, 5e-3])
    parser.add_argument("--hands", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    torch.manual_seed(args.seed)
    policy = LegalPolicy(args.config, 1.0, "float32")
    turns = play(policy.table(), args.hands, np.random.default_rng(args.seed))
    weight = torch.tensor(advantages(turns, "seat"), dtype=torch.float32)
    for chunk in np.array_split(np.arange(len(turns)), max(1, len(turns) // CHUNK)):
        log_pi = policy.log_policy([turns[i][1] for i in chunk])
        chosen = log_pi.gather(-1, torch.tensor([turns[i][2] for i in chunk])[:, None])[:, 0]
        (-(weight[chunk] * chosen).sum() / len(turns)).backward()
    params = list(policy.model.parameters())
    norm = float(torch.nn.utils.clip_grad_norm_(params, float("inf")))
    loaded = [p.detach().clone() for p in params]
    starts = {"as_loaded": loaded, "rounded": [p.to(torch.bfloat16).float() for p in loaded]}
    out: dict[str, Any] = {"bench": "bf16_step", "grad_norm": round(norm, 3)}
    out["lengths"] = args.lengths
    for name, start in starts.items():
        with torch.no_grad():
            for p, p0 in zip(params, start, strict=True):
                p.copy_(p0)
        before = {compute: read(policy, compute) for compute in ("float32", "bfloat16")}
        for length in args.lengths:
            with torch.no_grad():
                for p, p0 in zip(params, start, strict=True):
                    p.copy_(p0 - length * p.grad / norm)
            for compute in before:
                after = read(policy, compute)
                shift = np.mean([abs(after[k] - before[compute][k]) for k in after])
                out.setdefault(f"{name}_shift_{compute}", []).append(round(float(shift), 3))
            print(f"{name}, step length {length}: {out}", flush=True)
    out["minutes"] = round((time.monotonic() - started) / 60, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
