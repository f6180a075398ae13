"""``arena plot RUN_DIR``: PNG curves of a run, written into ``RUN_DIR/plots/``.

Curves, each panel only when the run has its data:

- ``reward``, ``invalid_rate``, ``kl``, ``entropy``: per learner step, from ``metrics.jsonl``
  (reward and invalid rate per game and role; the evaluations' invalid rate beside them);
- ``win_rate``: the score against each evaluation opponent at each evaluation (``before``,
  periodic, ``after``); the random mover's (label ``baseline``) is its own curve, at step 0;
- ``role_metrics``: each role's metric in the evaluations of role games;
- ``exploitability``: the exploitability readings (label ``strategy``) at the step of the
  weights each read, per game and temperature.

Every line of ``evals.jsonl`` is one of those three kinds (``results``, ``roles``,
``readings``); a line of any other shape is skipped with a warning, never a crash.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


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


def eval_panels(evals: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows (``step`` and one value per curve) of each panel drawn from ``evals.jsonl``:
    ``win_rate``, ``eval_invalid``, ``role_metrics``, ``exploitability``. A line of no known
    shape (or without the step its kind needs) is left out and named on stderr."""
    panels: dict[str, list[dict[str, Any]]] = {
        "win_rate": [],
        "eval_invalid": [],
        "role_metrics": [],
        "exploitability": [],
    }
    for number, line in enumerate(evals, 1):
        try:
            if "readings" in line:  # label strategy: each reading has its own step
                for r in line["readings"]:
                    temperature = "greedy" if r["temperature"] == 0 else f"T={r['temperature']:g}"
                    where = ", training sampling" if r.get("sampling") else ""
                    curve = f"{r['game']} ({temperature}{where})"
                    panels["exploitability"].append({"step": r["step"], curve: r["exploitability"]})
            elif "roles" in line:
                panels["role_metrics"].append(
                    {
                        "step": line["step"],
                        **{
                            f"{r['game']} {r['role']} ({r['seat']}): {r['metric']}": r["mean"]
                            for r in line["roles"]
                            if r.get("mean") is not None
                        },
                    }
                )
            elif "results" in line:
                mover = " (random mover)" if line.get("label") == "baseline" else ""
                results = line["results"]
                panels["win_rate"].append(
                    {
                        "step": line["step"],
                        **{f"{r['game']} vs {r['opponent']}{mover}": r["score"] for r in results},
                    }
                )
                if not mover:
                    panels["eval_invalid"].append(
                        {
                            "step": line["step"],
                            **{f"eval {r['game']}": r["invalid_rate"] for r in results},
                        }
                    )
            else:
                raise KeyError("results, roles or readings")
        except (KeyError, TypeError) as err:
            print(
                f"arena plot: evals.jsonl line {number} left out (no {err} where expected)",
                file=sys.stderr,
            )
    return panels


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
    from_evals = eval_panels(evals)
    panels = {
        "reward": series(metrics, "reward/"),
        "win_rate": series(from_evals["win_rate"], ""),
        "invalid_rate": {
            **series(metrics, "invalid_rate/"),
            **series(from_evals["eval_invalid"], ""),
        },
        "role_metrics": series(from_evals["role_metrics"], ""),
        "exploitability": series(from_evals["exploitability"], ""),
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
