"""Scoring choice turns with the HF backend: what the score memo and the prefix cache save, and
how close the tokens it computes come to the machine's matmul rate.

The inference service answers each choice turn with :meth:`HFPolicy.score
<arena.policies.hf.HFPolicy.score>`: a request the current weights have scored is answered by
the memo (:class:`arena.policies.scoring.ScoreMemo`), and of the rest each prompt is computed
only past the longest prefix whose KV blocks the weights already hold
(:mod:`arena.policies.prefix_cache`). Two streams of turns, each scored from fresh weights (an
empty memo and cache, as after a weight update), in the service's batches of ``--batch``:

- Tic-Tac-Toe-shaped: the turns of ``--ttt-games`` random games, the games' t-th turns in one
  batch as concurrent games would send them. Prompts rarely repeat, so the memo saves nothing;
  they share the role's instructions, which the prefix cache computes once.
- Kuhn-shaped: ``--decisions`` decisions drawn from the 12 information states, as in a
  self-play step. The memo answers all but the first of each state.

Each stream runs with the prefix cache on and off; the Kuhn stream also ``raw``: every request
through :func:`arena.policies.scoring.continuation_logprobs`, no memo, no cache (what scoring
cost before either). All arms return the same numbers (checked; ``max_abs_difference``, about 1e-6
in float32 and a bf16 rounding step in bfloat16). The model serves in ``--dtype`` (``auto``: what
this CPU runs fastest, as ``arena inference`` picks it). The matmul rate is measured in the same
run, on plain matmuls of the model's linear shapes in its dtype, as many rows as a call computes
tokens on average; a computed token costs
``2 * (its layers' linear weights)`` FLOPs, plus the output head's for each column whose logits
are taken (attention's own products, a few percent at these lengths, are left out).

Ends with one JSON line: ``ttt_s_per_turn`` / ``ttt_s_per_turn_nocache``, ``kuhn_s_per_turn`` /
``kuhn_s_per_turn_nocache``, ``tokens_computed_per_turn`` (Tic-Tac-Toe, cache on; ``_nocache``
beside it), ``matmul_fraction`` (Tic-Tac-Toe, cache on), the memo's ``memo_over_raw`` and more.

Run: .venv/bin/python bench/scoring.py [--quick] [--ttt-games 8] [--decisions 256] [--batch 64]
[--dtype auto]. ``--quick`` (1 game, 24 decisions, no raw arm) is meant to finish within a minute
on an idle 2-core CPU (most of it loading).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch
from studies.kuhn_choose import LegalPolicy

import games
from arena.models import to_dtype
from arena.play.choice import reply_ids
from arena.play.seating import SeatFactory
from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.policies.scoring import continuation_logprobs
from arena.policies.types import Prompt
from arena.run.config import load_run_config

Turn = tuple[np.ndarray, list[np.ndarray]]
"""(prompt ids, the legal replies' ids)."""


def ttt_turns(
    config_path: str, model: Any, tokenizer: Any, games_: int, seed: int
) -> list[list[Turn]]:
    """The turns of ``games_`` uniformly random Tic-Tac-Toe games as the seat sees them, one
    list per move number (the batch concurrent games would send)."""
    config = load_run_config(config_path, [])
    seats = SeatFactory(config.play, HFPolicy(model, tokenizer), ChatFormat(tokenizer))
    seat = seats.policy_seat("tictactoe-v0", trained=False)
    rng = np.random.default_rng(seed)
    by_move: list[list[Turn]] = []
    for game in range(games_):
        env = games.make("tictactoe-v0")
        env.reset(seed=seed + game)
        move = 0
        while not env.is_over:
            agent = env.agent_selection
            prompt = seat.prompt(env, agent, env.observe(agent)["text"])
            assert prompt.ids is not None
            legal = list(env.legal_actions(agent))
            if len(by_move) <= move:
                by_move.append([])
            by_move[move].append((prompt.ids, [reply_ids(seat, env, agent, a) for a in legal]))
            env.step(int(rng.choice(legal)))
            move += 1
    return by_move


def batches(turns: list[list[Turn]], size: int) -> list[list[Turn]]:
    return [group[i : i + size] for group in turns for i in range(0, len(group), size)]


def run(policy: HFPolicy, calls: list[list[Turn]]) -> tuple[float, list[list[np.ndarray]]]:
    """Seconds to score every call through ``policy.score``, and the scores."""
    started = time.perf_counter()
    out = []
    for call in calls:
        out += [
            s.logprobs for s in policy.score([Prompt(ids=p) for p, _ in call], [r for _, r in call])
        ]
    return time.perf_counter() - started, out


def computed_tokens(policy: HFPolicy, calls: list[list[Turn]]) -> tuple[int, int]:
    """(prompt tokens computed, reply tokens computed) by ``policy``'s last run over ``calls``
    (the memo's misses only: a repeated request computes nothing)."""
    distinct = {
        (p.tobytes(), tuple(r.tobytes() for r in rs)): (p, rs) for c in calls for p, rs in c
    }
    replies = sum(len(r) for _, rs in distinct.values() for r in rs)
    prompts = sum(len(p) for p, _ in distinct.values())
    if policy.prefix_cache is not None:
        prompts = policy.prefix_cache.prompt_tokens - policy.prefix_cache.reused_tokens
    return prompts, replies


def matmul_rate(model: Any, tokens: int, repeats: int = 5) -> float:
    """FLOP/s of plain torch matmuls of the model's shapes on this CPU, in the model's dtype:
    ``tokens`` rows (a forward's tokens) times each distinct linear weight of a layer, and the
    output head for a tenth of them, as ``F.linear`` runs them. The best of ``repeats``: the rate
    a perfect forward of that many tokens reaches."""
    dtype = next(model.parameters()).dtype
    shapes = {
        tuple(m.weight.shape)
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "lm_head" not in n
    }
    head = tuple(model.get_output_embeddings().weight.shape)
    work = [(tokens, shape) for shape in sorted(shapes)] + [(max(1, tokens // 10), head)]
    tensors = [
        (torch.randn(rows, shape[1], dtype=dtype), torch.randn(shape, dtype=dtype))
        for rows, shape in work
    ]
    total = sum(2.0 * rows * shape[0] * shape[1] for rows, shape in work)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first warms up
            started = time.perf_counter()
            for x, w in tensors:
                torch.nn.functional.linear(x, w)
            best = min(best, time.perf_counter() - started)
    return total / best


def flops(model: Any, prompt_tokens: int, reply_tokens: int, prompts: int) -> float:
    """FLOPs of the linear layers for the tokens computed; logits for each reply column and for
    each prompt's last token."""
    layers = sum(
        m.weight.numel()
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "lm_head" not in n
    )
    head = model.get_output_embeddings().weight.numel()
    return 2.0 * layers * (prompt_tokens + reply_tokens) + 2.0 * head * (reply_tokens + prompts)


def worst_difference(got: list[list[np.ndarray]], want: list[list[np.ndarray]]) -> float:
    return max(
        float(np.max(np.abs(a - b)))
        for g, w in zip(got, want, strict=True)
        for a, b in zip(g, w, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/selfplay.yaml", help="run config (seats)")
    parser.add_argument("--ttt-games", type=int, default=8, help="Tic-Tac-Toe games scored")
    parser.add_argument("--decisions", type=int, default=256, help="Kuhn scoring requests in all")
    parser.add_argument("--batch", type=int, default=64, help="requests per call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dtype", default="auto", help="serving dtype (auto: what this CPU runs fastest)"
    )
    parser.add_argument("--quick", action="store_true", help="1 game, 24 decisions, no raw arm")
    args = parser.parse_args()
    if args.quick:
        args.ttt_games, args.decisions = 1, 24
    legal = LegalPolicy(args.config, 1.0, "float32")
    dtype = to_dtype(args.dtype)
    model, tokenizer = legal.model.to(dtype), legal.tokenizer

    ttt = batches(ttt_turns(args.config, model, tokenizer, args.ttt_games, args.seed), args.batch)
    ttt_count = sum(len(c) for c in ttt)
    on = HFPolicy(model, tokenizer, max_batch=args.batch)
    ttt_on, ttt_scores = run(on, ttt)
    ttt_computed = computed_tokens(on, ttt)
    off = HFPolicy(model, tokenizer, max_batch=args.batch, prefix_cache_mb=0)
    ttt_off, ttt_plain = run(off, ttt)
    ttt_all = computed_tokens(off, ttt)

    states = list(legal.prompts.values())
    picks = np.random.default_rng(args.seed).integers(len(states), size=args.decisions)
    stream = [(states[i].prompt_ids, list(states[i].replies.values())) for i in picks]
    kuhn = [stream[i : i + args.batch] for i in range(0, len(stream), args.batch)]
    kuhn_on, kuhn_scores = run(HFPolicy(model, tokenizer, max_batch=args.batch), kuhn)
    kuhn_off, kuhn_plain = run(
        HFPolicy(model, tokenizer, max_batch=args.batch, prefix_cache_mb=0), kuhn
    )
    worst = max(worst_difference(ttt_scores, ttt_plain), worst_difference(kuhn_scores, kuhn_plain))
    report: dict[str, Any] = {}
    if not args.quick:
        started = time.perf_counter()
        raw = [s for call in kuhn for s in continuation_logprobs(model, call)]
        raw_seconds = time.perf_counter() - started
        worst = max(worst, worst_difference(kuhn_plain, raw))
        report = {
            "raw_decisions_per_s": round(args.decisions / raw_seconds, 1),
            "memo_over_raw": round(raw_seconds / kuhn_off, 1),
        }
    rate = flops(model, *ttt_computed, ttt_count) / ttt_on
    peak = matmul_rate(model, round(sum(ttt_computed) / len(ttt)))
    print(
        json.dumps(
            {
                "bench": "scoring",
                "quick": args.quick,
                "dtype": str(dtype).removeprefix("torch."),
                "threads": torch.get_num_threads(),
                "batch": args.batch,
                "ttt_turns": ttt_count,
                "ttt_s_per_turn": round(ttt_on / ttt_count, 4),
                "ttt_s_per_turn_nocache": round(ttt_off / ttt_count, 4),
                "tokens_computed_per_turn": round(sum(ttt_computed) / ttt_count, 1),
                "tokens_computed_per_turn_nocache": round(sum(ttt_all) / ttt_count, 1),
                "matmul_gflops": round(peak / 1e9, 1),
                "scoring_gflops": round(rate / 1e9, 1),
                "matmul_fraction": round(rate / peak, 3),
                "kuhn_decisions": args.decisions,
                "distinct_prompts": len({int(i) for i in picks}),
                "kuhn_s_per_turn": round(kuhn_on / args.decisions, 4),
                "kuhn_s_per_turn_nocache": round(kuhn_off / args.decisions, 4),
                "memo_decisions_per_s": round(args.decisions / kuhn_on, 1),
                **report,
                "max_abs_difference": worst,
            }
        )
    )


if __name__ == "__main__":
    main()
