"""Evaluation statistics and the before/after summary, against hand-computed values.

Run with ``.venv/bin/python -m pytest -q tests/arena/eval/test_evaluate.py``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from arena.eval.evaluate import MatchResult, game_score, mean_ci, score_interval, wilson
from arena.eval.summary import before_after, markdown
from arena.records import Episode, SeatAssignment, Turn


def test_wilson_interval_by_hand() -> None:
    # p = 0.5, n = 100, z = 1.96: centre 0.5, half = 1.96*sqrt(0.25/100 + 1.96^2/40000)/(1+1.96^2/100)
    low, high = wilson(50, 100)
    half = 1.959964 * math.sqrt(0.0025 + 1.959964**2 / 40000) / (1 + 1.959964**2 / 100)
    assert (low, high) == pytest.approx((0.5 - half, 0.5 + half))
    assert wilson(0, 10)[0] == 0.0 and 0.0 < wilson(0, 10)[1] < 0.35
    assert wilson(0, 0) == (0.0, 1.0)


def test_mean_interval_by_hand() -> None:
    # values 0, 1, 1, 1: mean 0.75, sample sd 0.5, half = 1.96 * 0.5 / 2 = 0.49
    assert mean_ci([0.0, 1.0, 1.0, 1.0]) == pytest.approx((0.26, 1.0), abs=1e-3)
    assert mean_ci([1.0]) == (0.0, 1.0)


def test_score_interval_counts_a_draw_as_half_a_win_by_hand() -> None:
    # z^2 = 1.959964^2 = 3.841459. 3 wins, 2 draws, 5 losses: p = (3 + 2/2) / 10 = 0.4
    #   denom = 1 + 0.3841459 = 1.3841459; centre = (0.4 + 0.1920729) / denom = 0.427753
    #   half = 1.959964 * sqrt(0.024 + 0.0096036) / denom = 0.259573 -> (0.168180, 0.687326)
    scores = [1.0] * 3 + [0.5] * 2 + [0.0] * 5
    assert score_interval(scores) == pytest.approx((0.168180, 0.687326), abs=1e-6)
    # 20 losses: p = 0, centre = half = (z^2 / 40) / (1 + z^2 / 20) = 0.0960365 / 1.1920730
    #   = 0.080563 -> (0, 0.161125); the normal approximation says (0, 0)
    assert score_interval([0.0] * 20) == pytest.approx((0.0, 0.161125), abs=1e-6)
    assert mean_ci([0.0] * 20) == (0.0, 0.0)
    # 20 draws: p = 0.5, half = 1.959964 * sqrt(0.0125 + 0.0024009) / 1.1920730 = 0.200702
    assert score_interval([0.5] * 20) == pytest.approx((0.299298, 0.700702), abs=1e-6)
    # no draws: exactly Wilson's interval of the win rate (7 of 10, as in test_ratings)
    assert score_interval([1.0] * 7 + [0.0] * 3) == wilson(7, 10)
    assert wilson(7, 10) == pytest.approx((0.396778, 0.892209), abs=1e-6)
    # 0 of 4: centre = half = (z^2 / 8) / (1 + z^2 / 4) = 0.480182 / 1.960365 = 0.244946
    assert wilson(0, 4) == pytest.approx((0.0, 0.489891), abs=1e-6)


def test_one_win_after_twenty_losses_is_no_improvement() -> None:
    lost = [(_episode({"a": -1.0, "b": 1.0}), "a")] * 20
    before = MatchResult.from_episodes("g", "random-v0", lost)
    assert before.score == 0.0 and before.score_ci == pytest.approx((0.0, 0.161125), abs=1e-6)
    one_win = [(_episode({"a": 1.0, "b": -1.0}), "a"), *lost[1:]]
    after = MatchResult.from_episodes("g", "random-v0", one_win)
    assert after.score == 0.05 and after.win_ci == after.score_ci == wilson(1, 20)
    row = before_after([before.to_dict()], [after.to_dict()])["g"]
    assert row["score_improved"] is False  # 0.05 lies inside [0, 0.161]


def _episode(rewards: dict[str, float]) -> Episode:
    seats = {s: SeatAssignment("player", "main") for s in rewards}
    return Episode(id="e", game="g", seed=0, seats=seats, final_rewards=rewards)


def test_game_score_handles_n_players_and_ties() -> None:
    assert game_score(_episode({"a": 1.0, "b": -1.0}), "a") == 1.0
    assert game_score(_episode({"a": 0.0, "b": 0.0}), "b") == 0.5
    assert game_score(_episode({"a": 2.0, "b": 2.0, "c": -4.0}), "a") == 0.5
    assert game_score(_episode({"a": -1.0, "b": 3.0, "c": -2.0}), "a") == 0.0


def test_summary_flags_changes_beyond_the_before_interval() -> None:
    def result(
        invalid: float, invalid_ci: list[float], score: float, score_ci: list[float]
    ) -> dict:
        return {
            "game": "g",
            "opponent": "random-v0",
            "games": 200,
            "invalid_rate": invalid,
            "invalid_ci": invalid_ci,
            "score": score,
            "score_ci": score_ci,
        }

    before = [result(0.6, [0.55, 0.65], 0.30, [0.25, 0.35])]
    after = [result(0.4, [0.35, 0.45], 0.34, [0.29, 0.39])]
    row = before_after(before, after)["g"]
    assert row["invalid_rate_improved"] is True  # 0.4 < 0.55
    assert row["score_improved"] is False  # 0.34 is inside [0.25, 0.35]
    assert row["games_per_eval"] == 200 and row["score_vs_random_before_ci"] == [0.25, 0.35]


def _ttt_episode(moves: list[tuple[str, int, bool]], rewards: dict[str, float]) -> Episode:
    """A Tic-Tac-Toe record: player_0 is the policy (role "player"), player_1 a bot."""
    empty = np.zeros(0, np.int32)
    seats = {
        "player_0": SeatAssignment("player", "main"),
        "player_1": SeatAssignment("bot", "random-v0", trained=False),
    }
    turns = [
        Turn(
            "t",
            i,
            "tictactoe-v0",
            seat,
            "bot" if seat == "player_1" else "player",
            empty,
            empty,
            empty.astype(np.float32),
            str(action),
            action,
            valid,
        )
        for i, (seat, action, valid) in enumerate(moves)
    ]
    return Episode("t", "tictactoe-v0", 0, seats, turns, rewards)


def test_match_result_judges_the_policy_moves_in_solved_games() -> None:
    # X0 and X1 keep the draw; X5 (after O4, O2) lets O win at 6: 2 optimal of 3 valid moves.
    # The invalid X4 counts in the invalid rate (1 of 4 policy turns), not in the judged moves.
    lost = _ttt_episode(
        [
            ("player_0", 0, True),
            ("player_1", 4, True),
            ("player_0", 1, True),
            ("player_1", 2, True),
            ("player_0", 4, False),
            ("player_0", 5, True),
            ("player_1", 6, True),
        ],
        {"player_0": -1.0, "player_1": 1.0},
    )
    result = MatchResult.from_episodes("tictactoe-v0", "random-v0", [(lost, "player_0")])
    assert (result.score, result.invalid_rate, result.policy_turns) == (0.0, 0.25, 4)
    assert result.optimal_move_rate == pytest.approx(2 / 3)
    assert result.optimal_move_ci == wilson(2, 3) and result.optimal_moves_judged == 3
    low, high = wilson(2, 3)
    # one game: every interval of the console line is "n too small"; from 10 games it shows
    assert "optimal moves 0.667 (n too small) of 3  (1 games)" in result.line()
    assert "score 0.000 (n too small)" in result.line()
    assert "invalid 0.250 (n too small)" in result.line()
    ten = replace(result, games=10)
    assert f"optimal moves 0.667 [{low:.3f}, {high:.3f}] of 3  (10 games)" in ten.line()
    assert result.to_dict()["optimal_move_ci"] == [low, high]
    # a bot evaluated in the policy's place has no policy turns: no invalid rate on its line
    bot_played = replace(result, policy_turns=0, invalid_rate=0.0, invalid_ci=wilson(0, 0))
    assert (
        "invalid" not in bot_played.line() and "W/D/L 0.00/0.00/1.00  optimal" in bot_played.line()
    )


def test_match_result_has_no_optimal_rate_where_the_game_is_not_solved() -> None:
    episode = _episode({"player_0": 1.0, "player_1": -1.0})
    result = MatchResult.from_episodes("kuhn-poker-v0", "random-v0", [(episode, "player_0")])
    assert result.optimal_move_rate is None and result.optimal_move_ci is None
    assert "optimal" not in result.line() and result.line().endswith("(1 games)")
    # every policy move invalid: nothing judged, no rate
    forfeit = _ttt_episode([("player_0", 9, False)], {"player_0": -1.0, "player_1": 1.0})
    result = MatchResult.from_episodes("tictactoe-v0", "random-v0", [(forfeit, "player_0")])
    assert result.optimal_move_rate is None and result.optimal_moves_judged == 0


def test_a_game_that_fails_is_an_error_of_its_row_never_a_loss() -> None:
    import asyncio

    from arena.eval.evaluate import evaluate
    from arena.play.seats import BotSeat
    from tests.arena.tournament.crashing_bot import CrashingBot

    # The evaluated seat alternates (game i: seat i mod 2); in seat 1 the bot raises on its
    # second move, so games 1 and 3 fail and games 0 and 2 finish.
    (result,) = asyncio.run(
        evaluate(
            lambda game_id, env, agent: BotSeat(CrashingBot(), "crashing"),
            ["tictactoe-v0"],
            ["random-v0"],
            games_per_match=4,
        )
    )
    assert (result.games, result.errors) == (2, 2)
    assert 'bot crashing failed: RuntimeError("the bot\'s process fell over")' in (
        result.first_error
    )
    assert result.win + result.draw + result.loss == pytest.approx(1.0)  # over the 2 finished
    assert result.line().endswith(f"(2 games)  2 errors (first: {result.first_error})")
    # every game fails: the row says so instead of a score
    all_fail = MatchResult.from_episodes("tictactoe-v0", "random-v0", [], errors=["x", "y"])
    assert (all_fail.games, all_fail.errors) == (0, 2)
    assert all_fail.line() == "tictactoe-v0 vs random-v0: every game failed  2 errors (first: x)"


def test_a_cooperative_game_reads_its_mean_return_beside_the_score() -> None:
    # mini-hanabi's seats share a return: every game is a draw (score 0.5) however well the team
    # played, so the line shows the mean return too. Returns 0.2 x 5 and 0.6 x 5: mean 0.4,
    # sample sd sqrt(10 * 0.04 / 9) = 0.210819, half = 1.959964 * 0.210819 / sqrt(10) = 0.130665
    played = [
        (replace(_episode({"player_0": r, "player_1": r}), game="mini-hanabi-v0"), "player_0")
        for r in [0.2] * 5 + [0.6] * 5
    ]
    result = MatchResult.from_episodes("mini-hanabi-v0", "random-v0", played)
    assert result.kind == "cooperative" and result.score == 0.5
    assert result.mean_return == pytest.approx(0.4)
    assert result.return_ci == pytest.approx((0.269335, 0.530665), abs=1e-6)
    assert result.line() == (
        "mini-hanabi-v0 vs random-v0: score 0.500 [0.237, 0.763]  return 0.400 [0.269, 0.531]"
        "  W/D/L 0.00/1.00/0.00  (10 games)"
    )
    # a competitive game's line is as before; one game has no return interval
    lone = MatchResult.from_episodes("g", "random-v0", [(_episode({"a": 1.0, "b": -1.0}), "a")])
    assert lone.kind == "competitive" and lone.return_ci is None and "return" not in lone.line()
    # the summary: the return before and after, beyond the before interval, and the random
    # mover's; the markdown shows the row
    better = played[5:] * 2  # ten games at 0.6
    after = MatchResult.from_episodes("mini-hanabi-v0", "random-v0", better)
    baseline = MatchResult.from_episodes("mini-hanabi-v0", "random-v0", played[:5] * 2)
    row = before_after([result.to_dict()], [after.to_dict()], [baseline.to_dict()])
    hanabi = row["mini-hanabi-v0"]
    assert hanabi["return_vs_random_before"] == pytest.approx(0.4)
    assert hanabi["return_vs_random_after"] == pytest.approx(0.6)
    assert hanabi["return_improved"] is True  # 0.6 > 0.530665
    assert hanabi["random_baseline_return"] == pytest.approx(0.2)
    assert hanabi["score_improved"] is False  # 0.5 both times: the score cannot see it
    assert (
        "| mini-hanabi-v0 | mean return vs random-v0 | 0.400 [0.269, 0.531] | 0.600 [0.600, "
        "0.600] | yes | 0.200 [0.200, 0.200] |" in markdown(row)
    )
