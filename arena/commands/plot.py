"""``arena plot RUN_DIR``: PNG curves of a run, written into ``RUN_DIR/plots/``.

Curves: reward per (game, role), score against each evaluation opponent, invalid-action rate,
KL and entropy (when the learner reports them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a run directory (runs/<name>/<time>)")


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def series(rows: list[dict], prefix: str) -> dict[str, tuple[list[float], list[float]]]:
    """Every metric whose name starts with ``prefix``, as (steps, values)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        for key, value in row.items():
            if key.startswith(prefix) and isinstance(value, (int, float)):
                steps, values = out.setdefault(key.removeprefix(prefix), ([], []))
                steps.append(row["step"])
                values.append(value)
    return out


def run(args: argparse.Namespace) -> int:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("arena plot needs matplotlib: pip install -e '.[watch]'", file=sys.stderr)
        return 1
    run_dir = Path(args.run_dir)
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    evals = read_jsonl(run_dir / "evals.jsonl")
    if not metrics and not evals:
        print(f"arena plot: no metrics.jsonl or evals.jsonl in {run_dir}", file=sys.stderr)
        return 1
    eval_rows = [
        {"step": e["step"], **{f"{r['game']} vs {r['opponent']}": r["score"] for r in e["results"]}}
        for e in evals
    ]
    eval_invalid = [
        {"step": e["step"], **{f"eval {r['game']}": r["invalid_rate"] for r in e["results"]}}
        for e in evals
    ]
    panels = {
        "reward": series(metrics, "reward/"),
        "win_rate": series(eval_rows, ""),
        "invalid_rate": {**series(metrics, "invalid_rate/"), **series(eval_invalid, "")},
        "kl": series(metrics, "learner/kl"),
        "entropy": series(metrics, "learner/entropy"),
    }
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    written = []
    for name, curves in panels.items():
        curves = {k: v for k, v in curves.items() if k != "step"}
        if not curves:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for label, (steps, values) in sorted(curves.items()):
            ax.plot(steps, values, marker="o", label=label or name)
        ax.set_xlabel("step")
        ax.set_ylabel(name.replace("_", " "))
        ax.set_title(f"{run_dir.name}: {name.replace('_', ' ')}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    for path in written:
        print(path)
    return 0
