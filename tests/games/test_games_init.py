"""The package API: games.make, ids, spec (a typed GameSpec), and the games registry.

Run with ``.venv/bin/python -m pytest -q tests/games/test_games_init.py``.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
from pettingzoo import AECEnv

import games
from arena.core.registry import Entry, RegistryError
from games.bots import registry as bot_registry
from games.game_spec import GameSpec, GameSpecError
from games.nim import Nim
from games.text_env import TextGame

NATIVE = {
    "tictactoe-v0": ((2, 2), "competitive", "perfect"),
    "connect-four-v0": ((2, 2), "competitive", "perfect"),
    "nim-v0": ((2, 2), "competitive", "perfect"),
    "kuhn-poker-v0": ((2, 2), "competitive", "hidden"),
    "leduc-holdem-v0": ((2, 2), "competitive", "hidden"),
    "prisoners-dilemma-v0": ((2, 2), "general-sum", "hidden"),
    "negotiation-v0": ((2, 2), "general-sum", "hidden"),
    "mini-hanabi-v0": ((2, 2), "cooperative", "hidden"),
    "liars-dice-v0": ((2, 6), "competitive", "hidden"),
}


def test_every_native_game_is_registered_with_its_spec() -> None:
    for game_id, (seats, kind, information) in NATIVE.items():
        spec = games.spec(game_id)
        assert isinstance(spec, GameSpec) and spec.id == game_id and spec.plugin is None
        assert (spec.seats, spec.kind, spec.information) == (seats, kind, information)
        assert spec.requires is None and spec.available()
    nim = games.spec("nim-v0")
    assert nim.entry_point == "games.nim:Nim"
    assert (nim.strongest_bot, nim.max_turns, nim.zero_sum) == ("nim-optimal-v0", 12, True)
    assert games.spec("mini-hanabi-v0").zero_sum is False  # cooperative: not zero-sum by default


def test_a_spec_is_frozen() -> None:
    spec = games.spec("kuhn-poker-v0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.kind = "cooperative"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.kwargs["x"] = 1  # type: ignore[index]


def test_adapter_samples_are_registered() -> None:
    ids = set(games.ids())
    for game_id in (
        "openspiel-tic_tac_toe-v0",
        "openspiel-kuhn_poker-v0",
        "openspiel-connect_four-v0",
        "openspiel-leduc_poker-v0",
        "pettingzoo-tictactoe-v0",
        "pettingzoo-connect_four-v0",
        "pettingzoo-rps-v0",
        "pettingzoo-chess-v0",
        "textarena-tictactoe-v0",
    ):
        assert game_id in ids


def test_make_passes_kwargs_to_the_game() -> None:
    env = games.make("nim-v0", heaps=(1, 2), max_retries=0)
    assert isinstance(env, Nim) and env.heaps == (1, 2) and env.max_retries == 0
    assert games.make("liars-dice-v0", num_players=5).possible_agents[-1] == "player_4"


def test_unknown_ids_name_the_nearest_ones() -> None:
    with pytest.raises(RegistryError, match="did you mean 'tictactoe-v0'"):
        games.make("tictactoe-v1")
    with pytest.raises(RegistryError, match="did you mean 'tictactoe-v0'"):
        games.spec("tictactoe-v1")


def test_every_strongest_bot_is_a_registered_bot() -> None:
    for game_id in games.ids():
        assert games.spec(game_id).strongest_bot in bot_registry, game_id


def test_the_spec_of_an_adapter_sample_needs_no_import(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_load(self: Entry) -> None:
        raise AssertionError(f"{self.id} was imported")

    monkeypatch.setattr(Entry, "load", no_load)
    spec = games.spec("textarena-kuhnpoker-v0")
    assert spec.information == "hidden" and spec.requires == "textarena"
    assert spec.kwargs == {"env_id": "KuhnPoker-v0-raw"}
    assert spec.entry_point == "games.adapters.textarena:TextArenaGame"


def test_available_follows_the_required_module(monkeypatch: pytest.MonkeyPatch) -> None:
    assert games.spec("tictactoe-v0").available()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspiel" else real(name, *a)
    )
    assert not games.spec("openspiel-kuhn_poker-v0").available()
    assert games.spec("kuhn-poker-v0").available()  # native: its OpenSpiel mirror is optional


# -- specs of broken games: each error names the game, its factory and what is wrong ------------
class NotATextGame(AECEnv):
    metadata = {"name": "plain_v0", "render_modes": []}


class NoSeats(TextGame):
    metadata = {"name": "no_seats_v0", "kind": "competitive", "information": "perfect"}


class Mixed(TextGame):
    metadata = {**TextGame.metadata, "kind": "mixed"}


def make_plain_game() -> TextGame:
    return Nim()


def spec_error(factory: object, **metadata: object) -> str:
    entry = Entry("broken-v0", factory, metadata=dict(metadata), plugin="some-dist")
    with pytest.raises(GameSpecError) as caught:
        GameSpec.from_entry(entry)
    err = caught.value
    assert (err.game_id, err.plugin) == ("broken-v0", "some-dist")
    assert str(err).startswith(f"game 'broken-v0' ({err.target}, plugin some-dist): ")
    return err.reason


def test_a_factory_that_is_not_a_text_game_is_named() -> None:
    reason = spec_error(NotATextGame)
    assert reason.startswith("NotATextGame is not a games.TextGame")
    assert "pettingzoo.utils.env.AECEnv" in reason
    assert "not a games.TextGame subclass" in spec_error(make_plain_game)


def test_a_missing_or_bad_field_is_named_with_its_class() -> None:
    assert spec_error(NoSeats).startswith("NoSeats.metadata lacks 'seats'")
    assert spec_error(Mixed).startswith("Mixed.metadata: 'kind' must be one of")
    assert "'seats' must be a (min, max) pair" in spec_error(Nim, seats=(3, 2))
    assert "unknown metadata ['seat']" in spec_error(Nim, seat=(2, 2))


def test_an_import_error_is_named() -> None:
    assert spec_error("no_such_module_xyz:Game").startswith(
        "cannot import it: ModuleNotFoundError: No module named 'no_such_module_xyz'"
    )
    assert spec_error("games.nim:Nope").startswith("cannot import it: AttributeError")


def test_registered_fields_win_over_the_class_and_need_no_import() -> None:
    entry = Entry(
        "lazy-v0",
        "no_such_module_xyz:Game",
        metadata={"seats": (2, 4), "kind": "cooperative", "information": "hidden"},
    )
    spec = GameSpec.from_entry(entry)  # imports nothing
    assert (spec.seats, spec.zero_sum, spec.strongest_bot) == ((2, 4), False, "random-v0")
    over = GameSpec.from_entry(Entry("nim-v0", Nim, metadata={"strongest_bot": "random-v0"}))
    assert (over.strongest_bot, over.max_turns, over.entry_point) == (
        "random-v0",
        12,
        "games.nim:Nim",
    )
