"""Learner benchmark: tokens/s of one update step, our learner against a bare torch loop.

Both sides train the same model (the embedded SmolLM2-135M by default, or a random-init
``--shape``: ``bench/shapes.py``, for a machine without weights) in fp32, optionally under bf16
``--autocast``, on ``--device`` (``auto``: CUDA where there is one), on the same tokens: B one-turn
episodes of L tokens each, a prompt of ``prompt_frac * L`` tokens and a response of the rest.

- **bare**: ``model(input_ids).logits`` -> cross-entropy on the response tokens -> backward ->
  grad-norm clip -> AdamW step. The least work any trainer must do for this batch.
- **learner**: ``Learner.add_episodes`` (record validation, returns, samples) + ``step``
  (advantages, filters, packing, the PPO/TIS loss, backward, clip, AdamW), LM head on the
  response tokens only (``sparse_logits``, the default).
- **learner-dense**: the same with the LM head on every position, as the bare loop does.

On CUDA every step ends with a synchronize, so the clock sees the GPU's work. ``*_tflops`` is
6 x parameters x tokens / step time (the usual training estimate, attention not counted).

On a shared machine the load changes from second to second, so the cases run interleaved, one
step each per round in rotating order; each rate is the median over rounds, and each ratio the
median of per-round ratios (``ratio_of_median_rates`` is the plain quotient of the median
rates, for comparison). Prints a table, then one JSON line.

Usage: python bench/learner.py [--quick] [--batch 4] [--seq-len 160] [--rounds 3]
       [--device auto|cpu|cuda] [--shape 135m|360m|1b|layers=..,hidden=..] [--autocast bfloat16]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from shapes import SHAPES, parameters, random_model

from arena.models import load_model, resolve_device
from arena.records import Episode, SeatAssignment, Turn, synthetic_turn
from trainers.config import LearnerConfig
from trainers.learner import Learner


def make_episodes(batch: int, seq_len: int, prompt_len: int, vocab: int, tag: str) -> list[Episode]:
    """``batch`` one-turn episodes with fixed token content (seed 0) and fresh ids."""
    rng = np.random.default_rng(0)
    episodes = []
    for i in range(batch):
        ids = rng.integers(10, vocab, size=seq_len).astype(np.int32)
        reward = 1.0 if i % 2 else -1.0  # half win, half lose: no advantage is zero
        turn = synthetic_turn(
            f"{tag}-{i}",
            game="bench",
            prompt=ids[:prompt_len],
            response=ids[prompt_len:],
            logprobs=-5.0,
            reward=reward,
        )
        episodes.append(one_turn_episode(turn, i))
    return episodes


def one_turn_episode(turn: Turn, seed: int) -> Episode:
    """An episode of ``turn`` alone, its reward the seat's outcome."""
    seats = {"p0": SeatAssignment("player", "main")}
    return Episode(turn.episode_id, "bench", seed, seats, [turn], {"p0": turn.reward})


CHOICE_SHAPES = {"kuhn": (111, 2, 3), "tictactoe": (137, 9, 4)}
"""Choice turns of the default run: prompt tokens, legal replies, tokens per reply (measured on
configs/selfplay.yaml's prompts: Kuhn's first move, Tic-Tac-Toe's empty board)."""


def make_choice_episodes(batch: int, shape: str, vocab: int, tag: str) -> list[Episode]:
    """``batch`` one-turn episodes of choice turns shaped like ``shape``'s (CHOICE_SHAPES)."""
    prompt_len, count, length = CHOICE_SHAPES[shape]
    rng = np.random.default_rng(0)
    episodes = []
    for i in range(batch):
        prompt = rng.integers(10, vocab, size=prompt_len).astype(np.int32)
        replies = [rng.integers(10, vocab, size=length).astype(np.int32) for _ in range(count)]
        played = i % count
        reward = 1.0 if i % 2 else -1.0
        # each reply -1 a token, chosen uniformly: the builder's defaults for a choice turn
        turn = synthetic_turn(
            f"{tag}-{i}",
            game="bench",
            prompt=prompt,
            action=played,
            reward=reward,
            choices=replies,
            choice_index=played,
        )
        episodes.append(one_turn_episode(turn, i))
    return episodes


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously; the CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_step_fn(
    model: torch.nn.Module,
    episodes: list[Episode],
    lr: float,
    device: torch.device,
    autocast: str | None = None,
) -> Callable[[], None]:
    seqs = torch.tensor(
        np.stack(
            [np.concatenate([e.turns[0].prompt_ids, e.turns[0].response_ids]) for e in episodes]
        ),
        dtype=torch.long,
        device=device,
    )
    inputs, targets = seqs[:, :-1], seqs[:, 1:]
    mask = torch.zeros_like(targets, dtype=torch.bool)
    mask[:, len(episodes[0].turns[0].prompt_ids) - 1 :] = True
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()

    def step() -> None:
        with torch.autocast(device.type, torch.bfloat16, enabled=autocast == "bfloat16"):
            logits = model(input_ids=inputs).logits
        loss = F.cross_entropy(logits[mask].float(), targets[mask])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)

    return step


def learner_step_fn(
    learner: Learner, batch: int, seq_len: int, prompt_len: int, vocab: int, choice: str = ""
) -> Callable[[], None]:
    counter = iter(range(1 << 30))

    def step() -> None:
        tag = f"s{next(counter)}"
        learner.add_episodes(
            make_choice_episodes(batch, choice, vocab, tag)
            if choice
            else make_episodes(batch, seq_len, prompt_len, vocab, tag)
        )
        metrics = learner.step()
        assert metrics is not None and metrics.get("samples") == batch, metrics
        synchronize(learner.device)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 x 64 tokens, 2 rounds")
    parser.add_argument("--model", default="smollm2-135m", help="a model spec (no --shape)")
    parser.add_argument(
        "--shape",
        default=None,
        help=f"a random-init model of this shape instead of --model: {', '.join(SHAPES)}, or "
        "layers=..,hidden=..[,heads=..,kv=..,inter=..] (bench/shapes.py)",
    )
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if any)")
    parser.add_argument(
        "--autocast", choices=["none", "bfloat16"], default="none", help="both sides alike"
    )
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=160)
    parser.add_argument("--prompt-frac", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument(
        "--choice",
        choices=list(CHOICE_SHAPES),
        default=None,
        help="instead: batches of choice turns shaped like this game's, the learner with "
        "shared-prefix rows (each prompt once for all its legal replies) against one row per reply",
    )
    args = parser.parse_args()
    if args.quick:
        args.batch, args.seq_len, args.rounds = 2, 64, 2
    if args.threads:
        torch.set_num_threads(args.threads)
    prompt_len = int(args.seq_len * args.prompt_frac)
    tokens = args.batch * args.seq_len
    lr = 1e-6
    device = resolve_device(args.device)
    autocast = None if args.autocast == "none" else args.autocast
    if args.shape:
        base, tokenizer = random_model(args.shape, device=str(device))
        model_name = f"random {args.shape}"
    else:
        base, tokenizer = load_model(args.model, dtype="float32", device=device)
        model_name = args.model
    vocab = int(base.config.vocab_size)
    params = parameters(base)
    config = LearnerConfig.from_dict(
        {
            "model": model_name,
            "device": str(device),
            "autocast": autocast,
            "optim": {"lr": lr, "grad_clip": 1.0},
            "batch": {"micro_batch_tokens": tokens, "max_seq_len": args.seq_len},
        }
    )
    if args.choice:
        choice_bench(args, config, base, tokenizer, vocab, model_name, device)
        return
    dense = LearnerConfig.from_dict({**config.to_dict(), "sparse_logits": False})
    cases: dict[str, Callable[[], None]] = {
        "bare": bare_step_fn(
            copy.deepcopy(base),
            make_episodes(args.batch, args.seq_len, prompt_len, vocab, "b"),
            lr,
            device,
            autocast,
        ),
        "learner": learner_step_fn(
            Learner(config, copy.deepcopy(base), tokenizer),
            args.batch,
            args.seq_len,
            prompt_len,
            vocab,
        ),
        "learner-dense": learner_step_fn(
            Learner(dense, base, tokenizer), args.batch, args.seq_len, prompt_len, vocab
        ),
    }
    for fn in cases.values():  # warm-up: allocator, optimizer state, first-call overheads
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - start)
    rates = {case: tokens / statistics.median(t) for case, t in times.items()}
    ratios = {
        case: statistics.median(times["bare"][i] / t[i] for i in range(args.rounds))
        for case, t in times.items()
    }
    tflops = {case: 6 * params * rate / 1e12 for case, rate in rates.items()}
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"

    print(
        f"model {model_name} ({params / 1e6:.1f} M params) fp32{' + bf16 autocast' if autocast else ''} "
        f"on {where}, batch {args.batch} x {args.seq_len} tokens (prompt {prompt_len}, response "
        f"{args.seq_len - prompt_len}), {torch.get_num_threads()} threads, {args.rounds} rounds"
    )
    print(f"{'case':<16}{'s/step (median)':>18}{'tok/s':>10}{'vs bare':>10}{'TFLOP/s':>10}")
    for case in names:
        print(
            f"{case:<16}{statistics.median(times[case]):>18.3f}{rates[case]:>10.1f}"
            f"{ratios[case]:>10.2f}{tflops[case]:>10.3f}"
        )
    print(
        json.dumps(
            {
                "bench": "learner",
                "model": model_name,
                "shape": args.shape,
                "params": params,
                "device": where,
                "autocast": autocast,
                "batch": args.batch,
                "seq_len": args.seq_len,
                "prompt_len": prompt_len,
                "rounds": args.rounds,
                "quick": args.quick,
                "bare_tok_s": round(rates["bare"], 1),
                "learner_tok_s": round(rates["learner"], 1),
                "learner_dense_tok_s": round(rates["learner-dense"], 1),
                "ratio_learner_vs_bare": round(ratios["learner"], 3),
                "ratio_learner_dense_vs_bare": round(ratios["learner-dense"], 3),
                "ratio_of_median_rates": round(rates["learner"] / rates["bare"], 3),
                "bare_tflops": round(tflops["bare"], 4),
                "learner_tflops": round(tflops["learner"], 4),
            }
        )
    )


def interleaved(cases: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    """Seconds per step of each case, one step each per round in rotating order (after one
    warm-up step each)."""
    for fn in cases.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - start)
    return times


def choice_bench(
    args: argparse.Namespace,
    config: LearnerConfig,
    base: torch.nn.Module,
    tokenizer: object,
    vocab: int,
    model_name: str,
    device: torch.device,
) -> None:
    """Shared-prefix rows against one row per legal reply, on choice turns (``--choice``)."""
    prompt_len, count, length = CHOICE_SHAPES[args.choice]
    data = config.to_dict()
    data["batch"] = {**data["batch"], "micro_batch_tokens": 4096, "max_seq_len": 1024}
    cases = {}
    for name, shared in (("shared", True), ("unshared", False)):
        cfg = LearnerConfig.from_dict({**data, "batch": {**data["batch"], "shared_prefix": shared}})
        learner = Learner(cfg, copy.deepcopy(base), tokenizer)
        cases[name] = learner_step_fn(learner, args.batch, 0, 0, vocab, args.choice)
    times = interleaved(cases, args.rounds)
    turns_s = {case: args.batch / statistics.median(t) for case, t in times.items()}
    speedup = statistics.median(
        times["unshared"][i] / times["shared"][i] for i in range(args.rounds)
    )
    rows = {
        "shared": prompt_len + count * (length - 1),
        "unshared": count * (prompt_len + length - 1),
    }
    print(
        f"model {model_name} on {device}: {args.batch} {args.choice}-shaped choice turns (prompt "
        f"{prompt_len} tokens, {count} replies of {length}), {args.rounds} rounds"
    )
    print(f"{'case':<10}{'s/step (median)':>18}{'turns/s':>10}{'input tokens/turn':>20}")
    for case in cases:
        print(
            f"{case:<10}{statistics.median(times[case]):>18.3f}{turns_s[case]:>10.2f}"
            f"{rows[case]:>20}"
        )
    print(
        json.dumps(
            {
                "bench": "learner_choice",
                "model": model_name,
                "device": str(device),
                "shape": args.choice,
                "batch": args.batch,
                "rounds": args.rounds,
                "shared_turns_s": round(turns_s["shared"], 3),
                "unshared_turns_s": round(turns_s["unshared"], 3),
                "input_tokens_per_turn_shared": rows["shared"],
                "input_tokens_per_turn_unshared": rows["unshared"],
                "speedup_shared_vs_unshared": round(speedup, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
