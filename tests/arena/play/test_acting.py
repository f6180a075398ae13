"""How a seat acts (arena/play/acting.py): which setting decides, and which games allow it."""

from __future__ import annotations

import pytest

import games
from arena.core.errors import ConfigError
from arena.play.acting import ACTS, CHOICE, DEFAULT_ACT, GENERATE, check_act, resolve_act
from arena.play.config import GameConfig


def test_nothing_set_generates() -> None:
    assert resolve_act() == DEFAULT_ACT == GENERATE
    assert GameConfig().act == DEFAULT_ACT
    assert ACTS == (GENERATE, CHOICE)


@pytest.mark.parametrize(
    ("command_line", "participant", "game", "expected"),
    [
        # the game's config decides when no one else does
        (None, None, CHOICE, CHOICE),
        (None, None, GENERATE, GENERATE),
        # the participant's own setting overrides the game's
        (None, CHOICE, GENERATE, CHOICE),
        (None, GENERATE, CHOICE, GENERATE),
        # the command line overrides both
        (CHOICE, GENERATE, GENERATE, CHOICE),
        (GENERATE, CHOICE, CHOICE, GENERATE),
        (CHOICE, None, GENERATE, CHOICE),
        # a source left out passes to the next
        (GENERATE, None, None, GENERATE),
        (None, CHOICE, None, CHOICE),
    ],
)
def test_each_source_overrides_the_next(
    command_line: str | None, participant: str | None, game: str | None, expected: str
) -> None:
    assert resolve_act(command_line, participant, game) == expected


def test_an_unknown_act_names_its_source() -> None:
    with pytest.raises(ConfigError, match="--act = 'chose'.*did you mean 'choice'"):
        resolve_act("chose", None, GENERATE)
    with pytest.raises(ConfigError, match="participant act = 'write'"):
        resolve_act(None, "write", GENERATE)


def test_a_free_text_game_is_refused_for_choice_naming_it() -> None:
    env = games.make("negotiation-v0")
    assert env.free_text
    with pytest.raises(ConfigError, match="negotiation-v0 takes free text") as refused:
        check_act(CHOICE, "negotiation-v0", env)
    message = str(refused.value)
    assert message.startswith("games.negotiation-v0: act: choice needs a game that lists")
    assert all(seat in message for seat in env.possible_agents)
    assert message.endswith("use act: generate")
    check_act(GENERATE, "negotiation-v0", env)  # generating plays any game


def test_the_refusal_names_only_the_seats_the_policy_plays() -> None:
    env = games.make("negotiation-v0")
    first, *rest = env.possible_agents
    with pytest.raises(ConfigError) as refused:
        check_act(CHOICE, "negotiation-v0", env, simulated={first})
    named = str(refused.value).split("(seats ")[1].split(")")[0]
    assert named == ", ".join(rest)


def test_a_game_that_lists_its_actions_may_choose() -> None:
    check_act(CHOICE, "tictactoe-v0", games.make("tictactoe-v0"))
    check_act(CHOICE, "kuhn-poker-v0", lambda: games.make("kuhn-poker-v0"))


def test_the_game_is_built_only_to_check_a_choice() -> None:
    built = []

    def build():
        built.append(1)
        return games.make("negotiation-v0")

    check_act(GENERATE, "negotiation-v0", build)
    assert built == []
    with pytest.raises(ConfigError, match="negotiation-v0"):
        check_act(CHOICE, "negotiation-v0", build)
    assert built == [1]
    with pytest.raises(ConfigError, match="act = 'chose'"):
        check_act("chose", "tictactoe-v0", build)
