"""``arena plot``: which curves each kind of ``evals.jsonl`` line gives, and a line of no known
shape left out with a warning. The plot of a real ``configs/smoke.yaml`` run is drawn in
tests/arena/commands/test_train.py (test_smoke_run_end_to_end).

Run with ``.venv/bin/python -m pytest -q tests/arena/commands/test_plot.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from arena.commands.plot import draw, eval_panels

RESULT = {"game": "tictactoe-v0", "opponent": "random-v0", "score": 0.25, "invalid_rate": 0.5}
READING = {
    "game": "kuhn-poker-v0",
    "label": "before",
    "temperature": 0.0,
    "exploitability": 0.9,
    "step": 0,
    "sampling": False,
}
ROLE = {"game": "retail-v0", "seat": "agent", "role": "executor", "metric": "pass", "mean": 0.5}
EVALS = [
    {"label": "before", "step": 0, "results": [RESULT]},
    {"label": "baseline", "step": 0, "results": [{**RESULT, "score": 0.75}]},
    {"label": "after", "step": 2, "results": [{**RESULT, "score": 0.5, "optimal_move_rate": 0.7}]},
    {"label": "strategy", "readings": [READING, {**READING, "temperature": 1.0, "sampling": True}]},
    {"label": "strategy", "readings": [{**READING, "step": 2, "exploitability": 0.4}]},
    # a role game's line holds its results rows and its roles (every game of this row failed)
    {
        "label": "after",
        "step": 2,
        "results": [{**RESULT, "game": "retail-v0", "games": 0, "score": 0.0}],
        "roles": [ROLE, {**ROLE, "seat": "user", "mean": None}],
    },
]


def test_each_kind_of_evals_line_gives_its_curves() -> None:
    panels = eval_panels(EVALS)
    # a row whose every game failed has no point (its score reads 0)
    assert panels["win_rate"] == [
        {"step": 0, "tictactoe-v0 vs random-v0": 0.25},
        {"step": 0, "tictactoe-v0 vs random-v0 (random mover)": 0.75},
        {"step": 2, "tictactoe-v0 vs random-v0": 0.5},
        {"step": 2},
    ]
    assert panels["eval_invalid"] == [
        {"step": 0, "eval tictactoe-v0": 0.5},
        {"step": 2, "eval tictactoe-v0": 0.5},
        {"step": 2},
    ]
    assert panels["exploitability"] == [
        {"step": 0, "kuhn-poker-v0 (greedy)": 0.9},
        {"step": 0, "kuhn-poker-v0 (T=1, training sampling)": 0.9},
        {"step": 2, "kuhn-poker-v0 (greedy)": 0.4},
    ]
    # only the rows that judged moves (the "after" one) give an optimal-move point
    assert panels["optimal_move_rate"] == [{"step": 2, "tictactoe-v0 vs random-v0": 0.7}]
    # a role whose every episode failed has no mean: no point
    assert panels["role_metrics"] == [{"step": 2, "retail-v0 executor (agent): pass": 0.5}]


def test_a_line_of_no_known_shape_is_left_out_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    panels = eval_panels([{"label": "future"}, {"label": "after", "results": [RESULT]}])
    assert all(rows == [] for rows in panels.values())
    err = capsys.readouterr().err
    assert "evals.jsonl line 1 left out" in err and "line 2 left out" in err


def test_the_command_plots_a_run_directory_with_every_kind_of_line(tmp_path: Path) -> None:
    (tmp_path / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVALS))
    metrics = [{"step": s, "reward/tictactoe-v0/player": -1.0, "learner/kl": 0.1} for s in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    done = subprocess.run(
        [sys.executable, "-m", "arena", "plot", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "plots").glob("*.png")) == [
        "exploitability.png",
        "invalid_rate.png",
        "kl.png",
        "optimal_move_rate.png",
        "reward.png",
        "role_metrics.png",
        "win_rate.png",
    ]


def test_whole_steps_and_coinciding_curves_both_visible() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Kuhn's and Tic-Tac-Toe's invalid rate, 1.0 at both steps of a smoke run: one line
    same = ([1, 2], [1.0, 1.0])
    curves = {"invalid_rate/kuhn-poker-v0/player": same, "invalid_rate/tictactoe-v0/player": same}
    fig = draw(plt, "invalid_rate", curves, "smoke: invalid rate")
    try:
        (ax,) = fig.axes
        fig.canvas.draw()
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        kuhn, ttt = ax.get_lines()
        assert kuhn.get_linestyle() != ttt.get_linestyle()
        assert kuhn.get_marker() != ttt.get_marker()
        assert ttt.get_markersize() < kuhn.get_markersize()  # drawn on top, seen inside it
    finally:
        plt.close(fig)


def test_a_mistyped_run_directory_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from arena.cli import main

    assert main(["plot", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err
        == f"arena plot: bad config: no such directory: {tmp_path / 'nope'}\n"
    )
    assert main(["plot", str(tmp_path)]) == 1  # a directory, but no run's metrics in it
    assert capsys.readouterr().err == f"arena plot: no metrics.jsonl or evals.jsonl in {tmp_path}\n"


def test_a_line_that_is_no_json_object_is_left_out_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A metrics.jsonl row cut short by a kill (and later rows after it) stopped `arena plot`
    # with a JSONDecodeError traceback; a row without a step, with a KeyError.
    from arena.commands.plot import read_jsonl, series

    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "learner/kl": 0.5}\n{"step": 2, "lea\n[1]\n\n'
        '{"learner/kl": 9.0}\n{"step": 3, "learner/kl": 0.25}\n'
    )
    rows = read_jsonl(path)
    assert series(rows, "learner/kl") == {"": ([1, 3], [0.5, 0.25])}
    assert capsys.readouterr().err.splitlines() == [
        'arena plot: metrics.jsonl line 2 left out: not a JSON object: \'{"step": 2, "lea\'',
        "arena plot: metrics.jsonl line 3 left out: not a JSON object: '[1]'",
    ]
