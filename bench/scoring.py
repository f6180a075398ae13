"""What the scoring memo saves when prompts repeat: Kuhn Poker's hands scored by the HF backend.

A step of the default run plays about 1024 Kuhn hands, some 1500 decisions, yet Kuhn has only 12
information states. The inference service answers each decision with
:meth:`HFPolicy.score <arena.policies.hf.HFPolicy.score>`, which keeps what the current weights
have scored (:class:`arena.policies.scoring.ScoreMemo`). This bench scores the same stream of
decisions, in the service's batches of ``--batch``, two ways on one model in one run:

- ``memo``: ``HFPolicy.score`` as the service calls it;
- ``raw``: :func:`arena.policies.scoring.continuation_logprobs` on every request, what scoring
  cost before the memo (and what a backend without one pays).

Both return the same numbers (checked). Ends with one JSON line: decisions per second each way
and their ratio.

Run: .venv/bin/python bench/scoring.py [--decisions 256] [--batch 64]
About 2 minutes on 2 CPU cores (float32), nearly all of it the raw arm.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from studies.kuhn_choose import LegalPolicy

from arena.policies.hf import HFPolicy
from arena.policies.scoring import continuation_logprobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/selfplay.yaml", help="run config (seat)")
    parser.add_argument("--decisions", type=int, default=256, help="scoring requests in all")
    parser.add_argument("--batch", type=int, default=64, help="requests per call")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    legal = LegalPolicy(args.config, 1.0, "float32")
    policy = HFPolicy(legal.model, legal.tokenizer, max_batch=args.batch)
    states = list(legal.prompts.values())
    # decisions in a self-play-like mix: every state about as often as any other
    picks = np.random.default_rng(args.seed).integers(len(states), size=args.decisions)
    stream = [(states[i].prompt_ids, list(states[i].replies.values())) for i in picks]
    calls = [stream[i : i + args.batch] for i in range(0, len(stream), args.batch)]

    started = time.perf_counter()
    memo = [s for call in calls for s in policy.score(*zip(*call, strict=True))]
    memo_seconds = time.perf_counter() - started

    started = time.perf_counter()
    raw = [s for call in calls for s in continuation_logprobs(policy.model, call)]
    raw_seconds = time.perf_counter() - started

    worst = max(
        float(np.max(np.abs(a - b)))
        for got, want in zip(memo, raw, strict=True)
        for a, b in zip(got.logprobs, want, strict=True)
    )
    print(
        json.dumps(
            {
                "bench": "scoring",
                "decisions": args.decisions,
                "distinct_prompts": len({int(i) for i in picks}),
                "batch": args.batch,
                "memo_decisions_per_s": round(args.decisions / memo_seconds, 1),
                "raw_decisions_per_s": round(args.decisions / raw_seconds, 1),
                "memo_over_raw": round(raw_seconds / memo_seconds, 1),
                "max_abs_difference": worst,
            }
        )
    )


if __name__ == "__main__":
    main()
