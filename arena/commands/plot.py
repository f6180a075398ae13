"""``arena plot RUN_DIR``: PNG curves of a run, written into ``RUN_DIR/plots/``.

Curves, each panel only when the run has its data:

- ``reward``, ``invalid_rate``, ``kl``, ``entropy``: per learner step, from ``metrics.jsonl``
  (reward and invalid rate per game and role; the evaluations' invalid rate beside them);
- ``win_rate``: the score against each evaluation opponent at each evaluation (``before``,
  periodic, ``after``); the random mover's (label ``baseline``) is its own curve, at step 0;
- ``role_metrics``: each role's metric in the evaluations of role games;
- ``exploitability``: the exploitability readings (label ``strategy``) at the step of the
  weights each read, per game and temperature: before and after training, and each checkpoint
  as it is saved;
- ``optimal_move_rate``: the share of the policy's moves that minimax rates optimal, at each
  evaluation (Tic-Tac-Toe; the random mover's at step 0).

The step axis ticks whole steps only, and each curve of a panel has its own line style and
marker, so curves that coincide (Kuhn's and Tic-Tac-Toe's invalid rate, both 1.0) stay visible.

Every line of ``evals.jsonl`` holds ``results``, ``roles`` (a role game's line holds both) or
``readings``; a row whose every game or episode failed gets no point, and a line of any other
shape, or one of either file that is not JSON (cut short by a kill), is skipped with a warning
naming it, never a crash.

Exit status: 0 when the PNGs are written; 1 when RUN_DIR holds neither metrics.jsonl nor
evals.jsonl (or matplotlib is missing); 2 when RUN_DIR is no directory (a mistyped path).
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
    """The JSON objects of ``path``, one a line; a line that is none (cut short by a kill or a
    full disk, edited) is left out with a warning naming it, never a crash."""
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            print(
                f"arena plot: {path.name} line {number} left out: not a JSON object: {line[:60]!r}",
                file=sys.stderr,
            )
    return rows


def series(rows: list[dict], prefix: str) -> dict[str, tuple[list[float], list[float]]]:
    """Every metric whose name starts with ``prefix``, as (steps, values)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        if not isinstance(row.get("step"), int | float):
            continue  # no step to plot it at (a line of no known shape)
        for key, value in row.items():
            if key.startswith(prefix) and isinstance(value, (int, float)):
                steps, values = out.setdefault(key.removeprefix(prefix), ([], []))
                steps.append(row["step"])
                values.append(value)
    return out


def eval_panels(evals: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows (``step`` and one value per curve) of each panel drawn from ``evals.jsonl``:
    ``win_rate``, ``eval_invalid``, ``role_metrics``, ``exploitability``, ``optimal_move_rate``. A row whose every game
    or episode failed has no value to draw (its score would read 0): no point. A line of no
    known shape (or without the step its kind needs) is left out and named on stderr."""
    panels: dict[str, list[dict[str, Any]]] = {
        "win_rate": [],
        "eval_invalid": [],
        "role_metrics": [],
        "exploitability": [],
        "optimal_move_rate": [],
    }
    for number, line in enumerate(evals, 1):
        try:
            rows = eval_rows(line)
        except (KeyError, TypeError) as err:
            print(
                f"arena plot: evals.jsonl line {number} left out (no {err} where expected)",
                file=sys.stderr,
            )
            continue
        for panel, row in rows:
            panels[panel].append(row)
    return panels


def eval_rows(line: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One ``evals.jsonl`` line's rows, each with its panel: its ``readings`` (label
    ``strategy``: each reading has its own step), ``results`` and ``roles`` (one line may hold
    both). Raises KeyError or TypeError for a line of no known shape."""
    if not any(kind in line for kind in ("readings", "results", "roles")):
        raise KeyError("results, roles or readings")
    out: list[tuple[str, dict[str, Any]]] = []
    for r in line.get("readings", []):
        temperature = "greedy" if r["temperature"] == 0 else f"T={r['temperature']:g}"
        where = ", training sampling" if r.get("sampling") else ""
        if r.get("seat_temperatures"):  # seats read at their own policies' temperatures
            from arena.eval.summary import seats_at

            where += seats_at(r["seat_temperatures"])
        out.append(
            (
                "exploitability",
                {"step": r["step"], f"{r['game']} ({temperature}{where})": r["exploitability"]},
            )
        )
    results = [r for r in line.get("results", []) if r.get("games", 1)]
    if "results" in line:
        mover = " (random mover)" if line.get("label") == "baseline" else ""
        scores = {f"{r['game']} vs {r['opponent']}{mover}": r["score"] for r in results}
        out.append(("win_rate", {"step": line["step"], **scores}))
        if not mover:
            invalid = {f"eval {r['game']}": r["invalid_rate"] for r in results}
            out.append(("eval_invalid", {"step": line["step"], **invalid}))
        optimal = {
            f"{r['game']} vs {r['opponent']}{mover}": r["optimal_move_rate"]
            for r in results
            if r.get("optimal_move_rate") is not None
        }
        if optimal:
            out.append(("optimal_move_rate", {"step": line["step"], **optimal}))
    if "roles" in line:
        metrics = {
            f"{r['game']} {r['role']} ({r['seat']}): {r['metric']}": r["mean"]
            for r in line["roles"]
            if r.get("mean") is not None
        }
        out.append(("role_metrics", {"step": line["step"], **metrics}))
    return out


LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "x")


def draw(
    plt: Any, name: str, curves: dict[str, tuple[list[float], list[float]]], title: str
) -> Any:
    """One panel's figure. Steps are whole numbers, so the step axis ticks only those. Curves
    often coincide (every game's invalid rate at 1.0 before training): each has its own line
    style and a hollow marker of its own shape, each later one smaller, so one drawn over
    another leaves both visible."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (label, (steps, values)) in enumerate(sorted(curves.items())):
        ax.plot(
            steps,
            values,
            linestyle=LINE_STYLES[i % len(LINE_STYLES)],
            marker=MARKERS[i % len(MARKERS)],
            markersize=max(4.0, 10.0 - 2.0 * i),
            fillstyle="none",  # hollow: a marker drawn over another leaves its outline
            markeredgewidth=1.5,
            label=label or name,
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(name.replace("_", " "))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def run(args: argparse.Namespace) -> int:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("arena plot needs matplotlib: pip install -e '.[watch]'", file=sys.stderr)
        return 1
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():  # a mistyped path: one line, exit 2, as arena eval says it
        from arena.core.errors import ConfigError

        raise ConfigError(f"no such directory: {run_dir}")
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
        "optimal_move_rate": series(from_evals["optimal_move_rate"], ""),
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
        fig = draw(plt, name, curves, f"{run_dir.name}: {name.replace('_', ' ')}")
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    for path in written:
        print(path)
    return 0
