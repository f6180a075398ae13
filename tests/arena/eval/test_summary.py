"""The end-of-run summary: strategy measures beside the scores, from given results and readings.

Run with ``.venv/bin/python -m pytest -q tests/arena/eval/test_summary.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arena.eval.strategy_reading import StrategyReading
from arena.eval.summary import before_after, markdown, write_eval_summary

TTT, KUHN = "tictactoe-v0", "kuhn-poker-v0"


def result(game: str, opponent: str, score: float, score_ci: list[float], **extra: Any) -> dict:
    row = {
        "game": game,
        "opponent": opponent,
        "games": 200,
        "score": score,
        "score_ci": score_ci,
        "invalid_rate": extra.pop("invalid", 0.0),
        "invalid_ci": extra.pop("invalid_ci", [0.0, 0.02]),
        "optimal_move_rate": None,
        "optimal_move_ci": None,
    }
    return {**row, **extra}


BEFORE = [
    result(TTT, "random-v0", 0.40, [0.33, 0.47], invalid=0.3, invalid_ci=[0.25, 0.35],
           optimal_move_rate=0.60, optimal_move_ci=[0.55, 0.65]),
    result(TTT, "minimax-v0", 0.05, [0.02, 0.08]),
    result(KUHN, "random-v0", 0.45, [0.38, 0.52]),
    result(KUHN, "kuhn-nash-v0", 0.30, [0.24, 0.36]),
]  # fmt: skip
AFTER = [
    result(TTT, "random-v0", 0.62, [0.55, 0.69], invalid=0.1, invalid_ci=[0.07, 0.13],
           optimal_move_rate=0.81, optimal_move_ci=[0.77, 0.85]),
    result(TTT, "minimax-v0", 0.10, [0.06, 0.14]),
    result(KUHN, "random-v0", 0.50, [0.43, 0.57]),
    result(KUHN, "kuhn-nash-v0", 0.33, [0.27, 0.39]),
]  # fmt: skip
BASELINE = [
    result(TTT, "random-v0", 0.50, [0.43, 0.57], optimal_move_rate=0.55, optimal_move_ci=[0.5, 0.6]),
    result(TTT, "minimax-v0", 0.04, [0.01, 0.07], optimal_move_rate=0.5, optimal_move_ci=[0.4, 0.6]),
    result(KUHN, "random-v0", 0.49, [0.42, 0.56]),
    result(KUHN, "kuhn-nash-v0", 0.41, [0.34, 0.48]),
]  # fmt: skip


def reading(label: str, t: float, x: float, mass: float, step: int, sampling: bool = False) -> dict:
    model = "smollm2-135m" if label == "before" else f"run/checkpoints/step-{step:08d}/model"
    return StrategyReading(KUHN, label, t, x, mass, step, model, sampling, 3.0).to_dict()


READINGS = [
    reading("before", 0.0, 0.5, 0.99, 0),
    reading("before", 0.7, 0.39, 0.994, 0, sampling=True),
    reading("after", 0.0, 1 / 6, 0.25, 12),
    reading("after", 0.7, 0.42, 0.2, 12, sampling=True),
]


def test_rows_set_strategy_measures_beside_the_scores() -> None:
    summary = before_after(BEFORE, AFTER, BASELINE, READINGS)
    ttt, kuhn = summary[TTT], summary[KUHN]
    # the strongest bot by name, its scores with their intervals; improved: 0.10 < 0.08? no
    assert ttt["strongest_bot"] == "minimax-v0"
    assert (ttt["score_vs_strongest_before"], ttt["score_vs_strongest_after"]) == (0.05, 0.10)
    assert ttt["score_vs_strongest_after_ci"] == [0.06, 0.14]
    assert ttt["score_vs_strongest_improved"] is True  # 0.10 > 0.08
    assert ttt["score_vs_minimax-v0_after"] == 0.10  # the per-opponent key stays
    assert kuhn["strongest_bot"] == "kuhn-nash-v0" and kuhn["score_vs_strongest_improved"] is False
    # optimal-move rate from the games against random: 0.81 > 0.65
    assert ttt["optimal_move_rate_before"] == 0.60 and ttt["optimal_move_rate_after"] == 0.81
    assert ttt["optimal_move_rate_after_ci"] == [0.77, 0.85]
    assert ttt["optimal_move_rate_improved"] is True
    assert "optimal_move_rate_before" not in kuhn
    # the random mover
    assert ttt["random_baseline_score"] == 0.50 and ttt["random_baseline_score_ci"] == [0.43, 0.57]
    assert ttt["random_baseline_optimal_move_rate"] == 0.55
    assert ttt["random_baseline_optimal_move_rate_ci"] == [0.5, 0.6]
    assert ttt["random_baseline_score_vs_strongest"] == 0.04
    assert kuhn["random_baseline_score"] == 0.49
    # exploitability: at the evaluation's temperature (greedy here) and the sampling one
    assert kuhn["kuhn_exploitability_before"] == 0.5
    assert kuhn["kuhn_exploitability_after"] == pytest.approx(1 / 6)
    assert (kuhn["kuhn_invalid_mass_before"], kuhn["kuhn_invalid_mass_after"]) == (0.99, 0.25)
    assert kuhn["kuhn_exploitability_temperature"] == 0.0
    assert kuhn["kuhn_exploitability_after_step"] == 12
    assert kuhn["kuhn_exploitability_improved"] is True  # 1/6 < 0.5
    assert kuhn["kuhn_exploitability_sampling_before"] == 0.39
    assert kuhn["kuhn_exploitability_sampling_after"] == 0.42
    assert kuhn["kuhn_invalid_mass_sampling_after"] == 0.2
    assert kuhn["kuhn_exploitability_sampling_temperature"] == 0.7
    assert not any(k.startswith("kuhn_") for k in ttt)
    # the earlier keys are all still there
    assert ttt["invalid_rate_improved"] is True and ttt["score_improved"] is True  # 0.62 > 0.47
    assert ttt["games_per_eval"] == 200


def test_rows_without_the_new_inputs_keep_the_old_shape() -> None:
    before = [result(TTT, "random-v0", 0.4, [0.3, 0.5])]
    after = [result(TTT, "random-v0", 0.45, [0.35, 0.55])]
    row = before_after(before, after)[TTT]
    assert row["score_improved"] is False
    assert not any(
        k.startswith(("random_baseline", "strongest", "score_vs_strongest", "optimal")) for k in row
    )
    assert "optimal-move" not in markdown({TTT: row}) and "strongest" not in markdown({TTT: row})


def test_the_strongest_bot_played_only_after_training_is_shown_after_only() -> None:
    # eval.opponents_before: [random-v0] (configs/selfplay_text.yaml): no score before to compare
    before = [r for r in BEFORE if r["opponent"] == "random-v0"]
    row = before_after(before, AFTER, BASELINE)[TTT]
    assert row["strongest_bot"] == "minimax-v0" and row["score_vs_strongest_after"] == 0.10
    assert "score_vs_strongest_before" not in row and "score_vs_strongest_improved" not in row
    assert (
        "| tictactoe-v0 | score vs minimax-v0 (strongest) | n/a | 0.100 [0.060, 0.140] | n/a "
        "| 0.040 [0.010, 0.070] |" in markdown({TTT: row}).splitlines()
    )


def test_the_optimal_move_row_shows_when_only_the_random_mover_has_a_rate() -> None:
    # a policy whose every move was invalid has no rate; the random mover's still says what a
    # legal mover gets
    row = before_after(BEFORE[1:2], AFTER[1:2], BASELINE[:1])[TTT]
    assert "optimal_move_rate_before" not in row
    assert (
        "| tictactoe-v0 | optimal-move rate (vs random-v0) | n/a | n/a | n/a "
        "| 0.550 [0.500, 0.600] |" in markdown({TTT: row}).splitlines()
    )


def test_markdown_has_one_row_per_measure_with_the_references(tmp_path: Path) -> None:
    table = write_eval_summary(
        tmp_path, BEFORE, AFTER, "demo", baseline=BASELINE, readings=READINGS
    )
    lines = table.splitlines()
    assert lines[0] == "| game | measure | before | after | improved | random mover |"
    assert (
        "| tictactoe-v0 | score vs random-v0 | 0.400 [0.330, 0.470] | 0.620 [0.550, 0.690] "
        "| yes | 0.500 [0.430, 0.570] |" in lines
    )
    assert (
        "| tictactoe-v0 | score vs minimax-v0 (strongest) | 0.050 [0.020, 0.080] "
        "| 0.100 [0.060, 0.140] | yes | 0.040 [0.010, 0.070] |" in lines
    )
    assert (
        "| tictactoe-v0 | optimal-move rate (vs random-v0) | 0.600 [0.550, 0.650] "
        "| 0.810 [0.770, 0.850] | yes | 0.550 [0.500, 0.600] |" in lines
    )
    assert (
        "| kuhn-poker-v0 | exploitability, greedy (chips/hand, lower is better) | 0.5000 "
        "| 0.1667 | yes | 0.4583 |" in lines
    )
    assert "| kuhn-poker-v0 | invalid reply mass, T=1 | 0.9900 | 0.2500 | yes | 0 |" in lines
    assert (
        "| kuhn-poker-v0 | exploitability, T=0.7, training sampling (chips/hand, lower is "
        "better) | 0.3900 | 0.4200 | no | 0.4583 |" in lines
    )
    assert (
        "kuhn-poker-v0 exploitability references (chips/hand): uniform random 0.458, always "
        "bet 0.333, card rule 0.167, Nash 0.000. After: the weights of checkpoint step 12." in lines
    )
    assert (tmp_path / "eval_summary.md").read_text().startswith("# demo: before and after")
    saved = json.loads((tmp_path / "eval_summary.json").read_text())
    assert saved[KUHN]["kuhn_exploitability_after_step"] == 12


def test_seats_read_at_their_own_temperatures_are_named() -> None:
    """A sampling read whose seats' policies sample at temperatures of their own: the summary
    keeps them beside the run's temperature, and the table's row names them."""
    own = {"player_0": 0.0, "player_1": 0.5}
    readings = [{**r, "seat_temperatures": own} if r["sampling"] else r for r in READINGS]
    kuhn = before_after(BEFORE, AFTER, BASELINE, readings)[KUHN]
    assert kuhn["kuhn_exploitability_sampling_temperature"] == 0.7
    assert kuhn["kuhn_exploitability_sampling_seat_temperatures"] == own
    assert "kuhn_exploitability_seat_temperatures" not in kuhn  # the evaluation's: one T
    assert (
        "| kuhn-poker-v0 | exploitability, T=0.7, training sampling, player_0 at greedy, "
        "player_1 at T=0.5 (chips/hand, lower is better) | 0.3900 | 0.4200 | no | 0.4583 |"
        in markdown({KUHN: kuhn}).splitlines()
    )


def role(seat: str, metric: str, mean: float | None, ci: list[float] | None, **extra: Any) -> dict:
    return {
        "game": "retail-v0",
        "seat": seat,
        "role": "executor-v0" if seat == "agent" else "simulated-user-v0",
        "metric": metric,
        "mean": mean,
        "ci": ci,
        "episodes": extra.pop("episodes", 50),
        "pass_k": {},
        "errors": extra.pop("errors", 0),
        "first_error": extra.pop("first_error", ""),
        "seats": {},
        **extra,
    }


def test_a_role_game_shows_each_roles_metric_before_and_after() -> None:
    before = [
        role("agent", "success", 0.10, [0.04, 0.21]),
        role("agent", "tool_errors", 0.8, [0.5, 1.1]),
        role("user", "", None, None, episodes=0, errors=50, first_error="simulator x failed"),
    ]
    after = [
        role("agent", "success", 0.34, [0.22, 0.48], errors=2, first_error="bot y failed"),
        role("agent", "tool_errors", 0.2, [0.1, 0.3]),
        role("user", "", None, None, episodes=0, errors=50, first_error="simulator x failed"),
    ]
    summary = before_after([*BEFORE[:1], *before], [*AFTER[:1], *after])
    assert set(summary) == {TTT, "retail-v0"}
    assert summary[TTT]["score_vs_random_after"] == 0.62  # the match rows are untouched
    entries = summary["retail-v0"]["roles"]
    assert [(e["seat"], e["metric"], e["change"]) for e in entries] == [
        ("agent", "success", "higher"),  # 0.34 > 0.21
        ("agent", "tool_errors", "lower"),  # 0.2 < 0.5: the game's business which way is good
        ("user", "", None),
    ]
    success = entries[0]
    assert (success["before"], success["after"], success["after_ci"]) == (0.10, 0.34, [0.22, 0.48])
    assert (success["errors_before"], success["errors_after"]) == (0, 2)
    assert success["first_error"] == "bot y failed"
    table = markdown(summary)
    assert "| tictactoe-v0 | invalid rate |" in table  # the match table first
    assert "| retail-v0 | invalid rate |" not in table  # a role game has no match rows
    assert (
        "| retail-v0 | executor-v0 (agent) | success | 0.100 [0.040, 0.210] | "
        "0.340 [0.220, 0.480] | higher |"
    ) in table.splitlines()
    assert (
        "| retail-v0 | simulated-user-v0 (user) | none | n/a (50 failed) | n/a (50 failed) | n/a |"
    ) in table.splitlines()
    assert "retail-v0 user: episodes failed (50 before, 50 after); the first: simulator x" in table


def test_a_run_of_role_games_only_or_with_no_evaluation(tmp_path: Path) -> None:
    only_roles = markdown(
        before_after(
            [role("agent", "success", 0.1, [0.0, 0.2])],
            [role("agent", "success", 0.15, [0.05, 0.3])],
        )
    )
    assert only_roles.splitlines()[:2] == [
        "| game | role (seat) | metric | before | after | change |",
        "|---|---|---|---|---|---|",
    ]
    assert "| retail-v0 | executor-v0 (agent) | success | 0.100 [0.000, 0.200] | " in only_roles
    assert markdown(before_after([], [])) == (
        "No evaluation results (eval.games: 0 skips every evaluation)."
    )


def test_a_seat_whose_episodes_reported_no_metrics_says_how_they_ended() -> None:
    # before training the untrained model forfeits every episode of a game that reports
    # nothing on a forfeit; after, it finishes them: the summary said "No evaluation results"
    silent = role(
        "agent",
        "",
        None,
        None,
        episodes=0,
        unreported={"illegal": 8},
        unreported_reason="Invalid action: no tool call",
    )
    summary = before_after([silent], [role("agent", "success", 0.25, [0.07, 0.59], episodes=8)])
    entries = summary["retail-v0"]["roles"]
    assert [(e["metric"], e.get("before"), e.get("after")) for e in entries] == [
        ("", None, None),
        ("success", None, 0.25),
    ]
    told = "no episode reported metrics (8 of 8 forfeited; the first: Invalid action: no tool call)"
    assert entries[0]["unreported_before"] == told
    table = markdown(summary)
    assert "| retail-v0 | executor-v0 (agent) | none | n/a (no metrics) | n/a | n/a |" in table
    assert f"retail-v0 agent before: {told}" in table.splitlines()


def test_games_that_failed_are_counted_never_scored() -> None:
    failed = result(TTT, "random-v0", 0.0, [0.0, 1.0], games=0, errors=4, first_error="boom")
    partly = result(TTT, "random-v0", 0.5, [0.2, 0.8], games=3, errors=1, first_error="bang")
    row = before_after([failed], [partly])[TTT]
    assert "score_vs_random_before" not in row and row["score_vs_random_after"] == 0.5
    assert (row["errors_before"], row["first_error_before"]) == (4, "boom")
    assert (row["errors_after"], row["first_error_after"]) == (1, "bang")
    table = markdown({TTT: row})
    # 3 games: the interval (kept in the JSON) is too wide to mean anything
    assert row["score_vs_random_after_ci"] == [0.2, 0.8]
    assert f"| {TTT} | score vs random-v0 | n/a | 0.500 (n too small) | n/a |" in table
    assert f"{TTT} before: 4 games failed and were not scored; the first: boom" in table


@pytest.mark.parametrize(
    ("games", "shown"), [(4, "0.750 (n too small)"), (10, "0.750 [0.750, 0.750]")]
)
def test_an_interval_over_fewer_than_10_games_is_printed_as_n_too_small(
    games: int, shown: str
) -> None:
    # every game alike: the interval has no width, which over 4 games claims certainty it lacks
    before = [result(TTT, "random-v0", 0.75, [0.75, 0.75], games=games, invalid_ci=[0.0, 0.0])]
    row = before_after(before, before)[TTT]
    assert row["score_vs_random_before_ci"] == [0.75, 0.75]  # the JSON keeps the interval
    invalid = "0.000 (n too small)" if games < 10 else "0.000 [0.000, 0.000]"
    lines = markdown({TTT: row}).splitlines()
    assert f"| {TTT} | score vs random-v0 | {shown} | {shown} | no | n/a |" in lines
    assert f"| {TTT} | invalid rate | {invalid} | {invalid} | no | 0 (legal moves only) |" in lines
