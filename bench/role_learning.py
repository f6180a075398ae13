"""Does a role game learn on the embedded model within 30 minutes? ``arena train
configs/mae_learn.yaml`` (the proposer/solver/judge game on easy ordering puzzles), judged on
the solver's headline metric: the role evaluation's solver accuracy before and after training
(``evals.jsonl``, Wilson 95% intervals, the same 200 tasks both times). It learned when the
accuracy after lies above the interval of the accuracy before.

A solver can gain accuracy without reasoning, by copying a name (or number) from the problem
at a fixed place: on two-person puzzles, always naming the first person is right half the time.
So the bench also plays the run's own evaluation tasks with such copy answers (the i-th
candidate of :meth:`games.mae.families.Family.candidates`, for each i) and reports the best,
``copy_baseline``; ``beyond_copy`` says whether the accuracy after lies above it (its interval's
lower end), which only reading the problem can give.

One run takes about half an hour on a 2-core CPU, so this is not part of ``make test``.
``--use RUN_DIR`` judges a finished run instead of starting one. ``--before RUN_DIR`` takes the
accuracy before training from another run of the same start and seed (a run with ``eval.before:
false``, e.g. the second arm of an A/B, plays none of its own). Ends with one JSON line.

Run: .venv/bin/python bench/role_learning.py [--config configs/mae_learn.yaml] [key=value ...]
     .venv/bin/python bench/role_learning.py --use runs/mae_learn/<time>
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 30 * 60
"""The goal's wall-time budget for one run."""


def train(config: str, overrides: list[str]) -> tuple[Path, float]:
    """One run of ``config``; its directory and its wall seconds (start to exit). The run
    directory is named here (``run_dir=`` among the overrides wins), so that two benches
    started at once never judge each other's run."""
    run_dir = next((o.split("=", 1)[1] for o in overrides if o.startswith("run_dir=")), None)
    if run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = f"runs/{Path(config).stem}/{stamp}-{os.getpid()}"
        overrides = [*overrides, f"run_dir={run_dir}"]
    argv = [sys.executable, "-m", "arena", "train", config, *overrides]
    started = time.monotonic()
    subprocess.run(argv, cwd=ROOT, check=True)
    return (ROOT / run_dir).resolve(), time.monotonic() - started


def role_row(run_dir: Path, label: str, game: str, seat: str, metric: str) -> dict[str, Any]:
    """The role-evaluation result of ``label`` (before / after) for one game, seat and metric."""
    for line in (run_dir / "evals.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("label") != label or "roles" not in row:
            continue
        for result in row["roles"]:
            if (result["game"], result["seat"], result["metric"]) == (game, seat, metric):
                return result
    raise SystemExit(f"{run_dir}: no {label} role evaluation of {game} {seat} {metric}")


def copy_baseline(run_dir: Path, game: str, seat: str, metric: str) -> tuple[float, int]:
    """The best accuracy, and its candidate index, of answering the i-th candidate of the
    problem (a name or number copied from its text) on the run's own role-evaluation tasks."""
    import games
    from arena.eval.roles import evaluate_roles
    from arena.play.seats import BotSeat
    from games.bots.base import Bot

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    kwargs = next(g.get("kwargs") or {} for g in config["games"] if g["id"] == game)
    strongest = games.spec(game).strongest_bot

    class Copier(Bot):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

        def act(self, env: Any, agent: str) -> str:
            options = env.family.candidates(env.task)
            return options[min(self.index, len(options) - 1)]

    def reference(game_id: str, env: Any, agent: str, seed: int) -> BotSeat:
        return BotSeat(games.bots.make(strongest, seed=seed), strongest)

    best = (0.0, 0)
    for index in range(6):  # an ordering puzzle names at most 6 people

        def copier(game_id: str, env: Any, agent: str, seed: int, i: int = index) -> BotSeat:
            return BotSeat(Copier(i), f"copy-{i}")

        results = asyncio.run(
            evaluate_roles(
                copier,
                reference,
                game,
                tasks=config["eval"]["games"],
                seats=[seat],
                seed=config["seed"] + 10_000,
                game_kwargs=kwargs,
            )
        )
        mean = next(r.mean for r in results if r.metric == metric)
        best = max(best, (mean, index))
    return best


def judge(
    run_dir: Path,
    seconds: float | None,
    game: str,
    seat: str,
    metric: str,
    before_dir: Path | None = None,
) -> dict[str, Any]:
    """The named figures of one run (its "before" from ``before_dir`` where given)."""
    before = role_row(before_dir or run_dir, "before", game, seat, metric)
    after = role_row(run_dir, "after", game, seat, metric)
    if seconds is None:  # a finished run: the wall time it recorded itself
        summary = (run_dir / "run_summary.jsonl").read_text().splitlines()
        seconds = json.loads(summary[-1]).get("wall_s") if summary else None
    low, high = before["ci"]
    copied, index = copy_baseline(run_dir, game, seat, metric)
    return {
        "bench": "role_learning",
        "run": str(run_dir.relative_to(ROOT) if run_dir.is_relative_to(ROOT) else run_dir),
        "game": game,
        "metric": metric,
        f"{metric}_before": round(before["mean"], 4),
        f"{metric}_before_ci": [round(low, 4), round(high, 4)],
        f"{metric}_after": round(after["mean"], 4),
        f"{metric}_after_ci": [round(v, 4) for v in after["ci"]],
        "eval_tasks": [before["episodes"], after["episodes"]],
        "wall_seconds": None if seconds is None else round(seconds, 1),
        "within_30_minutes": seconds is not None and seconds <= LIMIT_S,
        "learned": after["mean"] > high,
        "worse": after["mean"] < low,
        "copy_baseline": round(copied, 4),
        "copy_baseline_candidate": index,
        "beyond_copy": after["ci"][0] > copied,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/mae_learn.yaml")
    parser.add_argument("--use", default=None, help="judge this finished run directory")
    parser.add_argument(
        "--before",
        default=None,
        help="the run whose evaluation before training stands for this one",
    )
    parser.add_argument("--game", default="mae-v0")
    parser.add_argument("--seat", default="solver_0", help="the role's seat in the evaluation")
    parser.add_argument("--metric", default="solver_accuracy")
    parser.add_argument("overrides", nargs="*", help="key=value for the run")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    if args.use:
        run_dir, seconds = Path(args.use).resolve(), None
    else:
        run_dir, seconds = train(args.config, args.overrides)
    before_dir = Path(args.before).resolve() if args.before else None
    out = judge(run_dir, seconds, args.game, args.seat, args.metric, before_dir)
    if before_dir is not None:
        inside = before_dir.is_relative_to(ROOT)
        out["before_from"] = str(before_dir.relative_to(ROOT) if inside else before_dir)
    out["load_1min"] = [round(load, 2), round(os.getloadavg()[0], 2)]  # at start and at end
    print(json.dumps(out))


if __name__ == "__main__":
    main()
