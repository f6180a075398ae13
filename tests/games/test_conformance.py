"""The conformance kit over every registered game, and proof that it catches broken games.

Run with ``.venv/bin/python -m pytest -q tests/games/test_conformance.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

import games
from games import conformance
from games.conformance import check_game
from games.text_env import TextGame
from games.tictactoe import TicTacToe


@pytest.mark.parametrize("game_id", games.ids())
def test_every_registered_game_passes_the_kit(game_id: str) -> None:
    spec = games.spec(game_id)
    if not spec.available():
        pytest.skip(f"{game_id} needs {spec.requires}, which is not installed")
    report = check_game(game_id)
    assert report.passed, report.table()
    assert [r.name for r in report.results] == [
        "construct",
        "api_test",
        "seed_test",
        "text_roundtrip",
        "determinism",
        "hidden_info",
        "finishes",
        "bad_input",
    ]


@pytest.mark.parametrize("num_players", [3, 4, 5, 6])
def test_liars_dice_passes_the_kit_with_more_players(num_players: int) -> None:
    report = check_game("liars-dice-v0", num_players=num_players, playthroughs=6)
    assert report.passed, report.table()


class LeakyTicTacToe(TicTacToe):
    """Claims a secret that it prints to everyone."""

    metadata = {**TicTacToe.metadata, "information": "hidden"}

    def private_info(self, agent: str) -> list[str]:
        return [f"secret of {agent}"]

    def _describe(self, agent: str) -> str:
        return super()._describe(agent) + "\nsecret of player_0"


class SloppyParser(TicTacToe):
    """Reads cell numbers off by one."""

    def parse_action(self, agent: str, text: str) -> Any:
        action = super().parse_action(agent, text)
        return None if action is None else (action + 1) % 9


class NotZeroSum(TicTacToe):
    """Pays the loser too, though it claims to be competitive (zero-sum)."""

    def _apply(self, agent: str, action: int) -> dict[str, float]:
        rewards = super()._apply(agent, action)
        return {a: abs(r) for a, r in rewards.items()}


class Crashy(TicTacToe):
    """Breaks in the middle of a game."""

    def _describe(self, agent: str) -> str:
        if self.turn >= 3:
            raise RuntimeError("board renderer exploded")
        return super()._describe(agent)


class NotAGame:
    metadata: dict[str, Any] = {}


@pytest.mark.parametrize(
    ("factory", "failing"),
    [
        (LeakyTicTacToe, "hidden_info"),
        (SloppyParser, "text_roundtrip"),
        (NotZeroSum, "finishes"),
        (NotAGame, "construct"),
    ],
)
def test_the_kit_fails_broken_games(factory: Any, failing: str) -> None:
    report = check_game(factory, playthroughs=2)
    assert not report.passed
    assert failing in {r.name for r in report.results if not r.passed}, report.table()


class Endless(TextGame):
    """Two seats add 1 to a counter in turn, forever: a game that never ends, with a huge
    turn limit."""

    metadata = {**TextGame.metadata, "max_turns": 10**9}
    action_names = ("add 1",)

    def __init__(self) -> None:
        super().__init__(2, spaces.Discrete(1), spaces.Box(0, 1, (1,), np.int8))

    def _new_game(self, rng: np.random.Generator) -> None:
        self.total = 0

    def _current_agent(self) -> str:
        return self.possible_agents[self.total % 2]

    def _legal_actions(self, agent: str) -> list[int]:
        return [0]

    def _apply(self, agent: str, action: int) -> dict[str, float]:
        self.total += 1
        return {}

    def _outcome(self) -> None:
        return None

    def _observation_array(self, agent: str) -> np.ndarray:
        return np.zeros(1, np.int8)

    def _describe(self, agent: str) -> str:
        return f"The counter is at {self.total}."


def test_a_game_that_never_ends_fails_within_the_kits_own_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # random play ran to max_turns: the kit held the terminal for hours, saying nothing
    monkeypatch.setattr(conformance, "PLAY_TURNS_MAX", 50)
    report = check_game(Endless, playthroughs=1)
    finishes = next(r for r in report.results if r.name == "finishes")
    assert not finishes.passed
    assert finishes.detail == (
        "AssertionError: random play did not end within 50 turns (max_turns 1000000000); a run "
        "fails an episode after rollout.max_episode_turns turns (1000 by default)"
    )


def test_the_kit_reports_a_crash_as_a_failure_not_an_exception() -> None:
    report = check_game(Crashy, playthroughs=1)
    assert not report.passed and report.results[0].passed
    failed = [r for r in report.results if not r.passed]
    assert all("board renderer exploded" in r.detail for r in failed)
    assert "Crashy: FAILED" in report.table()


def test_api_test_leaves_out_only_the_warnings_every_text_game_raises() -> None:
    # Tic-Tac-Toe's Dict observation trips PettingZoo's three array heuristics and nothing else
    detail = next(r.detail for r in check_game("tictactoe-v0").results if r.name == "api_test")
    assert (
        detail
        == "0 PettingZoo warning(s), besides the 3 a text game's Dict observation always raises"
    )


def test_secrets_that_read_alike_for_every_seat_are_said_to_be_unchecked() -> None:
    from games.conformance import check_hidden_info

    class SameSecret(TicTacToe):  # each seat's secret reads the same: none can be told apart
        def private_info(self, agent: str) -> list[str]:
            return ["Your lucky cell is 5."]

    assert check_hidden_info(SameSecret, 2, 0) == (
        "every hidden string read the same as the seat's own secret: nothing checked "
        "(name the seat in private_info's strings, or give more --playthroughs)"
    )


class WrongStrongest(TicTacToe):
    metadata = {**TicTacToe.metadata, "strongest_bot": "minimax-v9"}


class Rulesless(TicTacToe):
    def rules(self, agent: str | None = None) -> str:
        return ""


def test_construct_names_an_unregistered_strongest_bot_and_missing_rules() -> None:
    (construct,) = check_game(WrongStrongest, playthroughs=1).results
    assert construct.detail == (
        "AssertionError: metadata['strongest_bot'] 'minimax-v9' is not a registered bot; "
        "did you mean 'minimax-v0', 'minimax-depth4-v0'?"
    )
    (construct,) = check_game(Rulesless, playthroughs=1).results
    assert construct.detail == (
        "AssertionError: rules('player_0') is empty: a game's rules are its module's docstring "
        f"({__name__} has none)"
    )
