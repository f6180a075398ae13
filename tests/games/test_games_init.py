"""The package API: games.make, ids, info, strongest_bot, and the registry pattern."""

from __future__ import annotations

import importlib.util

import pytest

import games
from games.bots import registry as bot_registry
from games.nim import Nim
from games.registry import RegistryError

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


def test_every_native_game_is_registered_with_its_metadata() -> None:
    for game_id, (seats, kind, information) in NATIVE.items():
        meta = games.info(game_id)
        assert (meta["seats"], meta["kind"], meta["information"]) == (seats, kind, information)


def test_adapter_samples_are_registered() -> None:
    ids = set(games.ids())
    for game_id in ("openspiel-tic_tac_toe-v0", "openspiel-kuhn_poker-v0",
                    "openspiel-connect_four-v0", "openspiel-leduc_poker-v0",
                    "pettingzoo-tictactoe-v0", "pettingzoo-connect_four-v0",
                    "pettingzoo-rps-v0", "pettingzoo-chess-v0", "textarena-tictactoe-v0"):
        assert game_id in ids


def test_make_passes_kwargs_to_the_game() -> None:
    env = games.make("nim-v0", heaps=(1, 2), max_retries=0)
    assert isinstance(env, Nim) and env.heaps == (1, 2) and env.max_retries == 0
    assert games.make("liars-dice-v0", num_players=5).possible_agents[-1] == "player_4"


def test_unknown_ids_name_the_nearest_ones() -> None:
    with pytest.raises(RegistryError, match="did you mean tictactoe-v0"):
        games.make("tictactoe-v1")


def test_every_strongest_bot_is_a_registered_bot() -> None:
    for game_id in games.ids():
        assert games.strongest_bot(game_id) in bot_registry, game_id


def test_info_of_an_adapter_sample_needs_no_import() -> None:
    meta = games.info("textarena-kuhnpoker-v0")
    assert meta["information"] == "hidden" and meta["requires"] == "textarena"


def test_available_follows_the_required_module(monkeypatch: pytest.MonkeyPatch) -> None:
    assert games.available("tictactoe-v0")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspiel" else real(name, *a))
    assert not games.available("openspiel-kuhn_poker-v0")
    assert games.available("kuhn-poker-v0")  # native: its OpenSpiel mirror is optional
