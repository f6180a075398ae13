"""Episodes per second against rollout actors, sync and async, compute-bound and waiting.

Every case is one ``arena train`` run (a subprocess: broker, inference actor, learner and N
rollout actors, as a user starts it) with the tiny model, in one bench run, side by side:

- ``compute``: ``configs/smoke.yaml`` (Tic-Tac-Toe and Kuhn Poker): episodes cost generation
  and training only, so they are bound by the CPU (or GPU);
- ``tools``: ``configs/smoke_tools.yaml`` (retail-v0, the support agent with tools, its user a
  scripted simulator that waits ``--latency`` seconds with ``asyncio.sleep`` before each reply):
  episodes spend most of their time waiting, as agentic RL waits on tools, simulated users and
  remote models.

Each is run with 1, 2 and 4 rollout actors (``rollout.actors``), in ``mode=sync`` (collect, then
train, then wait until the new weights are served) and ``mode=async`` (rollouts go on while the
learner trains, at most ``learner.batch.max_staleness`` rounds ahead). Both variants get the same
rollout shape (``rollout.episodes_per_step=16``, ``rollout.concurrency=4``: four actors hold a
whole step at once, one actor plays it in four waves), no checkpoints but the final one, no
exploitability reads and few evaluation games: the steps are what is timed.

Episodes per second come from the run's ``metrics.jsonl``: the episodes the learner trained on in
steps 2..N over the ``time`` from the end of step 1 to the end of step N (so process start-up,
evaluations and the first step's warm-up are left out; in async mode the episodes are those the
steps consumed). Each step's ``collect_s`` (sync: collecting; async: waiting for the batch),
``train_s`` (the learner's step and its reply) and the rest of the step (``other_s``: waiting
until the inference actor serves the new weights, logging) show where the time goes. The
staleness of the trained turns (learner version minus the turn's ``policy_version``) comes from
the learner's ``staleness_*`` metrics.

The machine may be shared: the load average (``uptime``) before and after is in the JSON, and
``--rounds R`` repeats the whole matrix (sync and async of a cell back to back, their order
alternating) and reports each cell's median.

Prints a table, then one JSON line. ``--quick`` makes a short run (4 steps a case).
Run: .venv/bin/python bench/scale.py [--quick] [--steps 8] [--latency 0.5] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"tools": "configs/smoke_tools.yaml", "compute": "configs/smoke.yaml"}
ACTORS = (1, 2, 4)
MODES = ("sync", "async")
TARGET = 1.3
"""Issue 16: async at least 1.3x sync with 4 actors on the tool-latency variant."""
COMMON = [
    "rollout.episodes_per_step=16",
    "rollout.concurrency=4",
    "rollout.transcripts_every=0",
    "checkpoint_every=100000",
    "eval.games=4",
    "eval.exploitability=false",
]


def load() -> list[float]:
    """The load average over 1, 5 and 15 minutes, as ``uptime`` prints it."""
    return [round(x, 2) for x in os.getloadavg()]


def train(
    variant: str, mode: str, actors: int, steps: int, latency: float, folder: Path, tag: str
) -> Path:
    """One ``arena train`` run; its run directory."""
    run_dir = folder / f"{variant}-{mode}-{actors}-{tag}"
    argv = [sys.executable, "-m", "arena", "train", VARIANTS[variant], *COMMON]
    argv += [f"mode={mode}", f"rollout.actors={actors}", f"steps={steps}", f"run_dir={run_dir}"]
    if variant == "tools":
        argv.append(f"games.0.simulators.user.kwargs.latency={latency}")
    log = folder / f"{run_dir.name}.log"
    with open(log, "w") as out:
        proc = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=3600)
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise RuntimeError(f"{' '.join(argv)} exited with {proc.returncode}:\n{tail}")
    return run_dir


def figures(run_dir: Path) -> dict[str, Any]:
    """Episodes/s and the time split of one run, from its ``metrics.jsonl``."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    if len(rows) < 2:
        raise RuntimeError(f"{run_dir}: need at least 2 steps to time, got {len(rows)}")
    window = rows[1:]
    seconds = rows[-1]["time"] - rows[0]["time"]
    durations = [b["time"] - a["time"] for a, b in zip(rows, rows[1:], strict=False)]

    def mean(key: str) -> float:
        return statistics.fmean(r.get(key, 0.0) for r in window)

    turns = [r.get("learner/turns", 0.0) for r in rows]
    summary = json.loads((run_dir / "run_summary.jsonl").read_text().splitlines()[-1])
    return {
        "eps": sum(r["episodes"] for r in window) / max(seconds, 1e-9),
        "step_s": statistics.fmean(durations),
        "collect_s": mean("collect_s"),
        "train_s": mean("train_s"),
        "other_s": statistics.fmean(durations) - mean("collect_s") - mean("train_s"),
        "update_s": mean("learner/step_time"),
        "episodes_per_step": statistics.fmean(r["episodes"] for r in window),
        # per-step figures of the learner (every step: staleness is not a rate)
        "staleness_mean": sum(
            r.get("learner/staleness_mean", 0.0) * t for r, t in zip(rows, turns, strict=True)
        )
        / max(sum(turns), 1.0),
        "staleness_p50": statistics.median(r.get("learner/staleness_p50", 0.0) for r in rows),
        "staleness_max": max(r.get("learner/staleness_max", 0.0) for r in rows),
        "eps_all_steps": summary["episodes_per_s"],
        "wall_s": summary["wall_s"],
    }


def median_cell(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (the staleness max: the max)."""
    out = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out["staleness_max"] = max(r["staleness_max"] for r in runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (4 steps a case)")
    parser.add_argument("--steps", type=int, default=None, help="learner steps a case (8)")
    parser.add_argument(
        "--latency", type=float, default=0.5, help="seconds the simulated user takes to reply"
    )
    parser.add_argument("--rounds", type=int, default=1, help="repeat the matrix, take medians")
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), help="which"
    )
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    args = parser.parse_args()
    steps = args.steps or (4 if args.quick else 8)
    load_start, started = load(), time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="arena-scale-", dir="/tmp"))
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    loads: list[list[float]] = []
    try:
        for r in range(args.rounds):
            for variant in args.variants:
                for actors in ACTORS:
                    for mode in MODES if r % 2 == 0 else MODES[::-1]:
                        run_dir = train(variant, mode, actors, steps, args.latency, folder, f"r{r}")
                        row = figures(run_dir)
                        loads.append(load())
                        row["load_1m"] = loads[-1][0]
                        cells.setdefault((variant, mode, actors), []).append(row)
                        print(
                            f"  {variant:<8}{mode:<6}{actors} actors: {row['eps']:6.2f} ep/s "
                            f"(load {loads[-1][0]:.1f})",
                            flush=True,
                        )
    finally:
        if args.keep:
            print(f"run directories kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    load_end = load()
    table = {key: median_cell(runs) for key, runs in cells.items()}

    print(
        f"\n{os.cpu_count()} CPUs; load average {load_start} at the start, {load_end} at the end; "
        f"{steps} steps a case, 16 episodes a step, concurrency 4 per actor, "
        f"user latency {args.latency} s (tools); {args.rounds} round(s), medians"
    )
    head = f"{'variant':<9}{'mode':<6}{'actors':>6}{'ep/s':>8}{'step s':>8}{'collect':>8}"
    head += f"{'train':>7}{'other':>7}{'update':>8}{'ep/step':>8}{'stale p50':>10}{'max':>5}"
    print(head)
    for (variant, mode, actors), row in table.items():
        print(
            f"{variant:<9}{mode:<6}{actors:>6}{row['eps']:>8.2f}{row['step_s']:>8.2f}"
            f"{row['collect_s']:>8.2f}{row['train_s']:>7.2f}{row['other_s']:>7.2f}"
            f"{row['update_s']:>8.2f}{row['episodes_per_step']:>8.1f}"
            f"{row['staleness_p50']:>10.1f}{row['staleness_max']:>5.0f}"
        )
    print(
        "collect: sync, collecting; async, waiting for the step's batch. train: the learner's "
        "step as the trainer waits for it. other: the rest of the step (sync: until the new "
        "weights are served). update: the learner's own step time."
    )

    def eps(variant: str, mode: str, actors: int) -> float | None:
        row = table.get((variant, mode, actors))
        return row["eps"] if row else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    result: dict[str, Any] = {"bench": "scale"}
    for variant, suffix in (("tools", ""), ("compute", "_compute")):
        for mode in MODES:
            for actors in ACTORS:
                result[f"{mode}_eps_{actors}{suffix}"] = eps(variant, mode, actors)
        for actors in ACTORS:
            result[f"async_vs_sync_{actors}{suffix}"] = ratio(
                eps(variant, "async", actors), eps(variant, "sync", actors)
            )
        result[f"sync_4_vs_1{suffix}"] = ratio(eps(variant, "sync", 4), eps(variant, "sync", 1))
    stale = table.get(("tools", "async", 4)) or table.get(("compute", "async", 4))
    result["staleness_p50"] = stale["staleness_p50"] if stale else None
    result["staleness_max"] = stale["staleness_max"] if stale else None
    result["staleness_mean"] = stale["staleness_mean"] if stale else None
    result["staleness_async"] = {
        f"{v}_{a}": [round(row["staleness_p50"], 2), row["staleness_max"]]
        for (v, m, a), row in table.items()
        if m == "async"
    }
    result["staleness_max_sync"] = max(
        (row["staleness_max"] for (_, m, _), row in table.items() if m == "sync"), default=None
    )
    for mode in MODES:
        row = table.get(("tools", mode, 4))
        if row:
            for key in ("step_s", "collect_s", "train_s", "other_s", "update_s"):
                result[f"{mode}_4_{key}"] = row[key]
    ratio4 = result["async_vs_sync_4"]
    result["target_async_vs_sync_4"] = TARGET
    result["target_met"] = ratio4 is not None and ratio4 >= TARGET
    result.update(
        latency_s=args.latency,
        steps=steps,
        rounds=args.rounds,
        eps_from="metrics.jsonl: episodes of steps 2..N / time from the end of step 1 to step N",
        cpus=os.cpu_count(),
        load_start=load_start,
        load_end=load_end,
        load_1m_per_run=[x[0] for x in loads],
        minutes=round((time.monotonic() - started) / 60, 1),
        quick=args.quick,
    )
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
