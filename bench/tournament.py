"""Matches per second of a tournament: one match at a time against the concurrent scheduler.

A 4-participant Tic-Tac-Toe round robin (the embedded SmolLM2 greedy and sampled, the random bot
and minimax: two model seats, six pairings, seat-swapped pairs) is played twice through
:func:`arena.tournament.runner.run_tournament`: with ``concurrency=1`` (sequential, one match at
a time) and with ``concurrency=32`` (matches concurrent, every model request batched by the one
inference actor both model participants share). Only the playing is timed: each run's model
loading is excluded. Ends with one JSON line.

Run: .venv/bin/python bench/tournament.py [--pairs 4]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from pathlib import Path

from arena.tournament.config import load_tournament_config
from arena.tournament.runner import run_tournament

ROOT = Path(__file__).resolve().parents[1]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            flags = Path("/proc/cpuinfo").read_text()
            bf16 = "avx512_bf16" in flags
            return f"{line.split(':', 1)[1].strip()} (AVX512-BF16: {'yes' if bf16 else 'no'})"
    return platform.processor()


def play(pairs: int, concurrency: int, out: Path, backend: str, dtype: str) -> tuple[int, float]:
    overrides = [f"pairs={pairs}", f"concurrency={concurrency}", f"out={out}"]
    overrides += ["exploitability=false"]
    for i in (2, 3):  # the two model participants
        overrides += [f"participants.{i}.backend={backend}", f"participants.{i}.dtype={dtype}"]
    config = load_tournament_config(str(ROOT / "configs" / "tournament.yaml"), overrides)
    result = run_tournament(config, on_line=lambda line: None)
    return result.played, result.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4, help="seat-swapped pairs per pairing")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--backend", default="hf", choices=("hf", "vllm"), help="model serving")
    parser.add_argument("--dtype", default="float32", help="model dtype (bfloat16 where fast)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        n_seq, s_seq = play(args.pairs, 1, Path(tmp) / "sequential", args.backend, args.dtype)
        n_par, s_par = play(
            args.pairs, args.concurrency, Path(tmp) / "parallel", args.backend, args.dtype
        )
    sequential, parallel = n_seq / s_seq, n_par / s_par
    print(f"sequential: {n_seq} matches in {s_seq:.1f} s")
    print(f"concurrent ({args.concurrency}): {n_par} matches in {s_par:.1f} s")
    print(
        json.dumps(
            {
                "bench": "tournament",
                "cpu": cpu_name(),
                "backend": args.backend,
                "dtype": args.dtype,
                "matches": n_par,
                "sequential_matches_per_s": round(sequential, 3),
                "parallel_matches_per_s": round(parallel, 3),
                "speedup": round(parallel / sequential, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
