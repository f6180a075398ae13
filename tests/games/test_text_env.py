"""The shared machinery of games.text_env.TextGame: invalid actions, step_text, bad input, limits.

Run with ``.venv/bin/python -m pytest -q tests/games/test_text_env.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from games.liars_dice import LiarsDice
from games.prisoners_dilemma import PrisonersDilemma
from games.text_env import GameOverError
from games.tictactoe import TicTacToe


def test_invalid_action_is_retried_with_feedback_then_forfeits() -> None:
    env = TicTacToe(max_retries=2, forfeit_penalty=1.0)
    env.reset(seed=0)
    env.step(4)
    for attempt in (1, 2):
        env.step(4)  # player_1 plays the taken centre
        info = env.infos["player_1"]
        assert info["invalid"] and info["retries"] == attempt and info["invalid_count"] == attempt
        assert info["invalid_reason"] == "cell 5 is already taken"
        assert env.agent_selection == "player_1" and not env.is_over
        assert env.rewards == {"player_0": 0.0, "player_1": 0.0}
        assert info["feedback"] in env.observe("player_1")["text"]
        assert f"{3 - attempt} attempt(s) left" in info["feedback"]
    env.step(4)
    assert env.is_over and env.termination_reason == "illegal"
    assert env.infos["player_1"]["forfeit"] and not env.infos["player_0"]["forfeit"]
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert all(env.terminations.values()) and not any(env.truncations.values())
    assert {i["termination_reason"] for i in env.infos.values()} == {"illegal"}


def test_a_valid_action_clears_the_retry_count_but_not_the_episode_count() -> None:
    env = TicTacToe(max_retries=1)
    env.reset(seed=0)
    env.step(9)  # out of range
    assert env.infos["player_0"]["retries"] == 1
    env.step(0)
    info = env.infos["player_0"]
    assert not info["invalid"] and info["retries"] == 0 and info["invalid_count"] == 1
    assert info["feedback"] == "" and "Invalid action" not in env.observe("player_0")["text"]


def test_zero_retries_forfeit_at_once_with_the_penalty_shared_by_the_others() -> None:
    env = LiarsDice(num_players=4, max_retries=0, forfeit_penalty=3.0)
    env.reset(seed=1)
    env.step(env.liar)  # nothing to challenge on the first turn
    assert env.termination_reason == "illegal"
    assert env.returns == {"player_0": -3.0, "player_1": 1.0, "player_2": 1.0, "player_3": 1.0}


def test_a_forfeit_in_a_general_sum_game_costs_the_forfeiter_and_pays_nobody() -> None:
    env = PrisonersDilemma(max_retries=0, forfeit_penalty=2.0)
    env.reset(seed=0)
    assert not env.zero_sum
    env.step_text("no idea")
    assert env.termination_reason == "illegal"
    assert env.returns == {"player_0": -2.0, "player_1": 0.0}


@pytest.mark.parametrize("bad", [None, -1, 9, 2.0, "4", True, np.float32(1.0)])
def test_malformed_actions_are_recorded_invalid(bad: object) -> None:
    env = TicTacToe()
    env.reset(seed=0)
    env.step(bad)
    assert env.infos["player_0"]["invalid"]
    assert env.board.cells == (0,) * 9 and env.agent_selection == "player_0"


def test_numpy_integers_are_accepted() -> None:
    env = TicTacToe()
    env.reset(seed=0)
    env.step(np.int64(4))
    assert env.board.cells[4] == 1 and not env.infos["player_0"]["invalid"]


def test_step_text_parses_and_reports_unreadable_text() -> None:
    env = TicTacToe()
    env.reset(seed=0)
    env.step_text("  5\n")
    assert env.board.cells[4] == 1
    env.step_text("the middle one")
    info = env.infos["player_1"]
    assert info["invalid"] and "could not read" in info["invalid_reason"]
    env.step_text("10")  # out of range: not a cell
    assert env.infos["player_1"]["invalid_count"] == 2
    with pytest.raises(TypeError):
        env.step_text(5)  # type: ignore[arg-type]


def test_stepping_a_finished_game() -> None:
    env = TicTacToe()
    env.reset(seed=0)
    for cell in (0, 3, 1, 4, 2):
        env.step(cell)
    assert env.is_over and env.returns == {"player_0": 1.0, "player_1": -1.0}
    with pytest.raises(ValueError, match="only valid action is None"):
        env.step(5)  # PettingZoo: a done agent may only step None
    with pytest.raises(ValueError, match="is done"):
        env.step_text("6")
    env.step(None)
    env.step(None)
    assert env.agents == []
    with pytest.raises(GameOverError):
        env.step(None)
    with pytest.raises(GameOverError):
        env.step_text("1")


def test_turn_limit_truncates() -> None:
    env = PrisonersDilemma(rounds=10, max_turns=3)
    env.reset(seed=0)
    for _ in range(3):
        env.step(0)
    assert env.termination_reason == "max_turns"
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env.returns == {"player_0": 3.0, "player_1": 3.0}  # one full round was played


def test_rules_come_from_the_module_docstring() -> None:
    env = TicTacToe()
    assert env.rules("player_0").startswith("Tic-Tac-Toe.")
    assert "Seats: 2" in env.rules("player_1")


def test_observation_text_lives_in_the_text_space() -> None:
    env = TicTacToe()
    env.reset(seed=0)
    space = env.observation_space("player_0")
    obs = env.observe("player_0")
    assert space.contains(obs)
    assert isinstance(space["text"], spaces.Text) and " " in space["text"].character_set
    assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].sum() == 9
    assert env.observe("player_1")["action_mask"].sum() == 0  # not its turn


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="seats"):
        LiarsDice(num_players=7)
    with pytest.raises(ValueError, match="max_retries"):
        TicTacToe(max_retries=-1)
    with pytest.raises(ValueError, match="render_mode"):
        TicTacToe(render_mode="rgb_array")


def test_render_ansi_returns_the_text_of_the_agent_to_move() -> None:
    env = TicTacToe(render_mode="ansi")
    env.reset(seed=0)
    assert env.render() == env.observe("player_0")["text"]


def test_a_description_that_is_not_text_is_named_with_its_hook() -> None:
    class NumericBoard(TicTacToe):
        def _describe(self, agent: str) -> np.ndarray:  # type: ignore[override]
            return np.zeros(9)

    env = NumericBoard()
    env.reset(seed=0)
    with pytest.raises(TypeError) as err:
        env.observe("player_0")
    assert str(err.value) == (
        "NumericBoard._describe('player_0') returned ndarray, not str: a seat's observation is text"
    )


class ListsCellTen(TicTacToe):
    def _legal_actions(self, agent: str) -> list[int]:
        return [*super()._legal_actions(agent), 9]


class ListsNothingAfterTwoMoves(TicTacToe):
    def _legal_actions(self, agent: str) -> list[int]:
        return [] if self.turn >= 2 else super()._legal_actions(agent)


def test_a_legal_action_outside_the_action_space_is_named_with_its_hook() -> None:
    # it failed as "IndexError: index 9 is out of bounds" from the action mask
    env = ListsCellTen()
    env.reset(seed=0)
    with pytest.raises(ValueError) as err:
        env.observe("player_0")
    assert str(err.value) == (
        "ListsCellTen._legal_actions('player_0') listed 9, not an action index 0..8 of its "
        "action space"
    )


def test_no_legal_action_in_a_game_that_is_on_is_named_with_its_hook() -> None:
    # it failed as the bot's "RandomBot has no legal action to choose from"
    env = ListsNothingAfterTwoMoves()
    env.reset(seed=0)
    env.step(0)
    env.step(1)
    with pytest.raises(ValueError) as err:
        env.legal_actions()
    assert str(err.value).startswith(
        "ListsNothingAfterTwoMoves._legal_actions('player_0') is empty but the game is not over "
        "(_outcome() is None)"
    )
    env.step(2)  # the game's own check of a move is unchanged
    assert env.infos["player_0"]["invalid"]


@pytest.mark.parametrize(
    ("rewards", "error"),
    [
        ({"player_0": float("nan")}, "gave player_0 a reward of nan: not finite"),
        ({"player_1": float("-inf")}, "gave player_1 a reward of -inf: not finite"),
        ({"player_0": "1"}, "gave player_0 a reward of '1', not a number"),
        ({"player_9": 1.0}, "rewarded 'player_9', not a seat of the game"),
        (None, "returned NoneType, not a mapping of seat to reward ({} when the move earns"),
    ],
)
def test_rewards_that_are_not_finite_numbers_of_its_seats_are_named_with_the_hook(
    rewards: object, error: str
) -> None:
    # a NaN made every return NaN: the game scored as a loss, with no word said
    class PaysBadly(TicTacToe):
        def _apply(self, agent: str, action: int) -> object:
            super()._apply(agent, action)
            return rewards

    env = PaysBadly()
    env.reset(seed=0)
    with pytest.raises((ValueError, TypeError)) as err:
        env.step(4)
    assert str(err.value).startswith(f"PaysBadly._apply('player_0', 4) {error}")


@pytest.mark.parametrize(("key", "value"), [("max_retries", "x"), ("forfeit_penalty", None)])
def test_a_limit_that_is_not_a_number_is_refused_naming_it(key: str, value: object) -> None:
    with pytest.raises(ValueError) as err:
        TicTacToe(**{key: value})
    assert str(err.value) == f"{key} must be a number, got {value!r}"


@pytest.mark.parametrize("value", [0, -3, 2.5, "x", True])
def test_a_turn_limit_that_is_not_a_positive_whole_number_is_refused_naming_it(
    value: object,
) -> None:
    # 0 built a game that ended after its first move; 2.5 was rounded down in silence
    with pytest.raises(ValueError) as err:
        TicTacToe(max_turns=value)
    assert str(err.value) == f"max_turns must be a whole number >= 1, got {value!r}"
