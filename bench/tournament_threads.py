"""A tournament whose model participants need two inference actors, which serve at once: each
actor with its share of the cores (what ``arena tournament`` gives them) against each with
every core (``OMP_NUM_THREADS`` = the core count, what they took before).

The participants are the embedded SmolLM2 in float32 and in bfloat16 (two actors, since a
dtype is part of what an actor serves) and the random bot, playing Tic-Tac-Toe by choice in
seat-swapped pairs with 32 matches in flight. Each arm runs ``--rounds`` times, alternating;
the whole command is timed, model loading included.

    python bench/tournament_threads.py [--pairs 6] [--rounds 2]

Ends with one JSON line: the median seconds of each arm and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """
participants:
  - {name: random, bot: random-v0}
  - {name: f32, model: smollm2-135m, act: choice, dtype: float32, sampling: {temperature: 1.0}}
  - {name: b16, model: smollm2-135m, act: choice, dtype: bfloat16, sampling: {temperature: 1.0}}
games: [{id: tictactoe-v0}]
pairs: PAIRS
concurrency: 32
"""


def tournament(config: Path, out: Path, threads: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "arena", "tournament", str(config), f"out={out}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"the tournament failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    arms = {"shared": None, "every_core": str(cores)}
    times: dict[str, list[float]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "tournament.yaml"
        config.write_text(CONFIG.replace("PAIRS", str(args.pairs)))
        for round_ in range(args.rounds):
            for name, threads in arms.items():
                times[name].append(tournament(config, Path(tmp) / f"{name}-{round_}", threads))
                print(f"round {round_ + 1} {name}: {times[name][-1]:.1f} s", flush=True)
    shared, every = (statistics.median(times[name]) for name in arms)
    print(
        json.dumps(
            {
                "bench": "tournament_threads",
                "cores": cores,
                "pairs": args.pairs,
                "rounds": args.rounds,
                "shared_s": round(shared, 1),
                "every_core_s": round(every, 1),
                "speedup_shared": round(every / shared, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
