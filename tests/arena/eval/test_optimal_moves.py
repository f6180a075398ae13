"""The optimal-move judge on hand-built Tic-Tac-Toe and Nim positions, and on recorded episodes.

Values are minimax-v0's: +1 / 0 / -1 at the end, times 0.99 per move, so a win on the next move
is worth 0.99 and a loss on the opponent's next move -0.99^2 = -0.9801.

Run with ``.venv/bin/python -m pytest -q tests/arena/eval/test_optimal_moves.py``.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import games
import games.bots
from arena.eval.evaluate import MatchResult
from arena.eval.optimal_moves import (
    exact_value,
    judge_episode,
    move_values,
    optimal_move_rate,
    optimal_moves,
    solvable,
)
from arena.play.episode import play_episode
from arena.play.seats import BotSeat
from arena.records import Episode, SeatAssignment, Turn
from games.bots.minimax import AlphaBetaBot
from games.nim import Heaps
from games.tictactoe import Board

X, NOUGHT = 1, 2
WIN_NEXT = 0.99
LOSE_NEXT = -(0.99**2)
WIN_IN_THREE = 0.99**3


def board(**cells: int) -> Board:
    """A board from ``c0=X, c4=NOUGHT, ...`` (cells 0..8, row by row)."""
    grid = [0] * 9
    for name, mark in cells.items():
        grid[int(name[1:])] = mark
    return Board(tuple(grid))


def test_only_the_block_avoids_a_loss() -> None:
    # X X .        O to move: X threatens 2; blocking there leads to a forced draw
    # . O .        (X blocks 6, O blocks 3, X blocks 5, then nobody can win); any other move
    # . . .        lets X win at once.
    position = board(c0=X, c1=X, c4=NOUGHT)
    assert position.player == 1
    values = move_values(position)
    assert values[2] == 0.0
    assert all(values[m] == pytest.approx(LOSE_NEXT) for m in (3, 5, 6, 7, 8))
    assert optimal_moves(position) == {2}


def test_the_immediate_win_when_it_is_the_only_one() -> None:
    # X X .        X to move wins at 2; O threatens 5, so any other move but 5 loses, and 5
    # O O .        only draws.
    # . . .
    position = board(c0=X, c1=X, c3=NOUGHT, c4=NOUGHT)
    values = move_values(position)
    assert values[2] == pytest.approx(WIN_NEXT)
    assert values[8] == pytest.approx(LOSE_NEXT)
    assert optimal_moves(position) == {2}


def test_a_slower_forced_win_is_optimal_but_not_minimax_choice() -> None:
    # X O O        X wins at 8 now; 6 (threats 3 and 8) and 3 (threats 5, 6 and 8) are forks
    # . X .        that win two moves later, 0.99^3. All three keep the win: optimal. Only 8 is
    # . . .        what minimax-v0 plays (the quickest win).
    position = board(c0=X, c1=NOUGHT, c2=NOUGHT, c4=X)
    values = move_values(position)
    assert values[8] == pytest.approx(WIN_NEXT)
    assert values[6] == pytest.approx(WIN_IN_THREE)
    assert values[3] == pytest.approx(WIN_IN_THREE)
    assert {8, 6, 3} <= optimal_moves(position)
    assert AlphaBetaBot().best_moves(position) == [8]


def test_every_opening_draws() -> None:
    assert exact_value(Board()) == 0.0
    assert optimal_moves(Board()) == set(range(9))


def test_nim_takes_the_move_to_nim_sum_zero() -> None:
    # heaps (1, 2), nim-sum 3: taking 1 from heap 2 leaves (1, 1), lost for the opponent, who
    # takes one and leaves the last to us: 0.99^3. Moves: heap * width + count - 1, width 2.
    position = Heaps((1, 2), 2)
    values = move_values(position)
    assert values == pytest.approx({2: WIN_IN_THREE, 0: LOSE_NEXT, 3: LOSE_NEXT})
    assert optimal_moves(position) == {2}
    assert exact_value(Heaps((1, 1), 2)) == pytest.approx(-(0.99**2))


def test_only_solved_games_are_judged() -> None:
    assert solvable("tictactoe-v0") and solvable("nim-v0")
    assert not solvable("connect-four-v0") and not solvable("kuhn-poker-v0")


def _turn(index: int, seat: str, role: str, action: int | None, valid: bool = True) -> Turn:
    empty = np.zeros(0, np.int32)
    return Turn(
        "e",
        index,
        "tictactoe-v0",
        seat,
        role,
        empty,
        empty,
        empty.astype(np.float32),
        str(action),
        action,
        valid,
    )


def _episode(moves: list[tuple[str, str, int | None, bool]]) -> Episode:
    seats = {
        "player_0": SeatAssignment("player", "main"),
        "player_1": SeatAssignment("bot", "random-v0", trained=False),
    }
    turns = [
        _turn(i, seat, role, action, valid) for i, (seat, role, action, valid) in enumerate(moves)
    ]
    return Episode("e", "tictactoe-v0", 7, seats, turns, {"player_0": -1.0, "player_1": 1.0})


def test_a_recorded_game_is_replayed_and_its_policy_moves_judged() -> None:
    # X0 (draw: optimal), O4, X1 (forced draw: optimal), O2 (threatens 6), X tries 4 (taken:
    # invalid, skipped), then X5 (loses: O completes 2-4-6), O6.
    episode = _episode(
        [
            ("player_0", "player", 0, True),
            ("player_1", "bot", 4, True),
            ("player_0", "player", 1, True),
            ("player_1", "bot", 2, True),
            ("player_0", "player", 4, False),
            ("player_0", "player", 5, True),
            ("player_1", "bot", 6, True),
        ]
    )
    judged = judge_episode(episode, "player_0")
    assert [j.action for j in judged] == [0, 1, 5]
    assert [j.optimal for j in judged] == [True, True, False]
    assert judged[2].value == pytest.approx(LOSE_NEXT) and judged[2].best == 0.0
    rate = optimal_move_rate([(episode, "player_0")])
    assert (rate.optimal, rate.moves, rate.unreplayable) == (2, 3, 0)
    assert rate.rate == pytest.approx(2 / 3)
    # the bot's seat: O4 and O2 keep the draw (after X0 X1, 2 is forced); O6 wins
    assert [j.optimal for j in judge_episode(episode, "player_1")] == [True, True, True]


def test_a_record_that_does_not_replay_is_left_out() -> None:
    wrong_mover = _episode([("player_1", "bot", 4, True)])
    with pytest.raises(ValueError, match="does not follow"):
        judge_episode(wrong_mover, "player_0")
    no_action = _episode([("player_0", "player", None, True)])
    good = _episode([("player_0", "player", 4, True)])
    rate = optimal_move_rate([(no_action, "player_0"), (good, "player_0")])
    assert (rate.optimal, rate.moves, rate.unreplayable) == (1, 1, 1)


def test_minimax_plays_only_optimal_moves_in_real_episodes() -> None:
    async def play(seed: int) -> Episode:
        env = games.make("tictactoe-v0")
        seats = {
            "player_0": BotSeat(games.bots.make("minimax-v0", seed=seed), "minimax-v0"),
            "player_1": BotSeat(games.bots.make("random-v0", seed=seed), "random-v0"),
        }
        return await play_episode(env, "tictactoe-v0", seats, seed=seed, episode_id=f"m{seed}")

    episodes = [asyncio.run(play(seed)) for seed in range(4)]
    rate = optimal_move_rate([(e, "player_0") for e in episodes])
    assert rate.moves >= 4 * 3 and rate.optimal == rate.moves == rate.minimax_choices
    result = MatchResult.from_episodes("tictactoe-v0", "random-v0", [(episodes[0], "player_0")])
    assert result.optimal_move_rate == 1.0
    assert result.policy_turns == 0  # bot turns are not policy turns; they are still judged
