"""Arena's games: PettingZoo AEC games with a text layer, adapters, reference bots, and a
conformance kit.

    import games
    env = games.make("tictactoe-v0")          # a games.TextGame (a pettingzoo.AECEnv)
    games.ids()                               # every registered game id
    games.info("kuhn-poker-v0")               # seats, kind, information, strongest_bot, ...

Third-party games register through the ``arena.games`` entry-point group: the entry point's
name is the id and its value the ``"module:Factory"`` string. ``arena check-game ID`` then runs
:func:`games.conformance.check_game` on it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from games.registry import Registry, RegistryError
from games.text_env import GameOverError, TextGame

__all__ = ["GameOverError", "Registry", "RegistryError", "TextGame", "available", "ids", "info",
           "make", "registry", "strongest_bot"]

registry: Registry[TextGame] = Registry("game", entry_point_group="arena.games")

for _id, _factory in {
    "tictactoe-v0": "games.tictactoe:TicTacToe",
    "connect-four-v0": "games.connect_four:ConnectFour",
    "nim-v0": "games.nim:Nim",
    "kuhn-poker-v0": "games.kuhn_poker:KuhnPoker",
    "leduc-holdem-v0": "games.leduc_holdem:LeducHoldem",
    "prisoners-dilemma-v0": "games.prisoners_dilemma:PrisonersDilemma",
    "negotiation-v0": "games.negotiation:Negotiation",
    "mini-hanabi-v0": "games.mini_hanabi:MiniHanabi",
    "liars-dice-v0": "games.liars_dice:LiarsDice",
}.items():
    registry.register(_id, _factory)

# Adapter samples carry their metadata, so listing them needs neither their library nor a build;
# ``requires`` names the module they import.
_PERFECT_2P = {"seats": (2, 2), "kind": "competitive", "information": "perfect"}
_HIDDEN_2P = {**_PERFECT_2P, "information": "hidden"}
for _game, _meta in {
    "tic_tac_toe": {**_PERFECT_2P, "strongest_bot": "mcts-v0"},
    "connect_four": {**_PERFECT_2P, "strongest_bot": "mcts-v0"},
    "kuhn_poker": {**_HIDDEN_2P, "strongest_bot": "kuhn-nash-v0"},
    "leduc_poker": {**_HIDDEN_2P, "strongest_bot": "leduc-cfr-v0"},
}.items():
    registry.register(f"openspiel-{_game}-v0", "games.adapters.openspiel:OpenSpielGame",
                      kwargs={"game": _game}, requires="pyspiel", **_meta)
for _env, _meta in {
    "tictactoe": _PERFECT_2P,
    "connect_four": _PERFECT_2P,
    "rps": _HIDDEN_2P,
    "chess": _PERFECT_2P,
}.items():
    registry.register(f"pettingzoo-{_env}-v0", "games.adapters.pettingzoo_classic:PettingZooClassic",
                      kwargs={"env": _env}, requires="chess" if _env == "chess" else "pettingzoo",
                      strongest_bot="random-v0", **_meta)
for _env, _meta in {
    "TicTacToe-v0-raw": _PERFECT_2P,
    "Nim-v0-raw": _PERFECT_2P,
    "KuhnPoker-v0-raw": _HIDDEN_2P,
}.items():
    _name = _env.removesuffix("-v0-raw").lower()
    registry.register(f"textarena-{_name}-v0", "games.adapters.textarena:TextArenaGame",
                      kwargs={"env_id": _env}, requires="textarena", strongest_bot="random-v0",
                      **_meta)

INFO_KEYS = ("seats", "kind", "information", "strongest_bot")


def make(game_id: str, **kwargs: Any) -> TextGame:
    """Build the game registered as ``game_id``; kwargs override its registered defaults."""
    return registry.make(game_id, **kwargs)


def ids() -> list[str]:
    """Every registered game id, plugins included, sorted."""
    return registry.ids()


def info(game_id: str) -> dict[str, Any]:
    """A game's metadata (seats, kind, information, strongest_bot, ...) without building it.

    Entries registered with metadata answer from the registry; others from their class's
    ``metadata``, which imports the game's module but builds nothing.
    """
    entry = registry.spec(game_id)
    meta = dict(entry.metadata)
    if not all(key in meta for key in INFO_KEYS):
        meta = {**getattr(entry.load(), "metadata", {}), **meta}
    meta.setdefault("strongest_bot", "random-v0")
    return meta


def strongest_bot(game_id: str) -> str:
    """Id (in :data:`games.bots.registry`) of the strongest reference bot for ``game_id``."""
    return info(game_id)["strongest_bot"]


def available(game_id: str) -> bool:
    """Whether the library ``game_id`` needs (its ``requires`` metadata) is installed."""
    module = registry.spec(game_id).metadata.get("requires")
    return module is None or importlib.util.find_spec(module) is not None
