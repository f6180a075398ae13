"""Arena's games: PettingZoo AEC games with a text layer, adapters, reference bots, and a
conformance kit.

    import games
    env = games.make("tictactoe-v0")          # a games.TextGame (a pettingzoo.AECEnv)
    games.ids()                               # every registered game id
    games.spec("kuhn-poker-v0")               # a GameSpec: seats, kind, information, ...
    games.spec("kuhn-poker-v0").strongest_bot # "kuhn-nash-v0"

A :class:`~games.game_spec.GameSpec` is read without building the game (see
:mod:`games.game_spec`): native games state their facts in their class's ``metadata``; the
adapter samples registered below state them with their id, so listing them needs neither their
library nor a build.

Third-party games register through the ``arena.games`` entry-point group: the entry point's
name is the id and its value the ``"module:Factory"`` string of a :class:`TextGame` subclass.
``arena check-game ID`` then runs :func:`games.conformance.check_game` on it, and ``arena games``
lists it (or says why it cannot).
"""

from __future__ import annotations

from typing import Any

from arena.core.registry import Registry, RegistryError
from games.game_spec import GameSpec, GameSpecError
from games.text_env import GameOverError, TextGame

__all__ = [
    "GameOverError",
    "GameSpec",
    "GameSpecError",
    "RegistryError",
    "TextGame",
    "ids",
    "make",
    "registry",
    "spec",
]

registry: Registry[TextGame] = Registry("game", entry_point_group="arena.games")
"""Game id -> its factory; the entries' metadata holds registered :class:`GameSpec` fields."""

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
    "mae-v0": "games.mae.game:ProposerSolverJudge",
    "retail-v0": "games.retail:RetailSupport",
    "planner-executor-v0": "games.planner.game:PlannerExecutor",
    "search-selfplay-v0": "games.search.game:SearchSelfPlay",
}.items():
    registry.register(_id, _factory)

# Adapter samples: one adapter class plays many games, so each sample states its GameSpec fields
# here. All are two-player zero-sum; ``requires`` names the library the adapter imports.
_OPENSPIEL = "games.adapters.openspiel:OpenSpielGame"
_PETTINGZOO = "games.adapters.pettingzoo_classic:PettingZooClassic"
_TEXTARENA = "games.adapters.textarena:TextArenaGame"
for _id, _factory, _kwargs, _information, _strongest, _requires in (
    (
        "openspiel-tic_tac_toe-v0",
        _OPENSPIEL,
        {"game": "tic_tac_toe"},
        "perfect",
        "mcts-v0",
        "pyspiel",
    ),
    (
        "openspiel-connect_four-v0",
        _OPENSPIEL,
        {"game": "connect_four"},
        "perfect",
        "mcts-v0",
        "pyspiel",
    ),
    (
        "openspiel-kuhn_poker-v0",
        _OPENSPIEL,
        {"game": "kuhn_poker"},
        "hidden",
        "kuhn-nash-v0",
        "pyspiel",
    ),
    (
        "openspiel-leduc_poker-v0",
        _OPENSPIEL,
        {"game": "leduc_poker"},
        "hidden",
        "leduc-cfr-v0",
        "pyspiel",
    ),
    (
        "pettingzoo-tictactoe-v0",
        _PETTINGZOO,
        {"env": "tictactoe"},
        "perfect",
        "random-v0",
        "pettingzoo",
    ),
    (
        "pettingzoo-connect_four-v0",
        _PETTINGZOO,
        {"env": "connect_four"},
        "perfect",
        "random-v0",
        "pettingzoo",
    ),
    ("pettingzoo-rps-v0", _PETTINGZOO, {"env": "rps"}, "hidden", "random-v0", "pettingzoo"),
    ("pettingzoo-chess-v0", _PETTINGZOO, {"env": "chess"}, "perfect", "random-v0", "chess"),
    (
        "textarena-tictactoe-v0",
        _TEXTARENA,
        {"env_id": "TicTacToe-v0-raw"},
        "perfect",
        "random-v0",
        "textarena",
    ),
    ("textarena-nim-v0", _TEXTARENA, {"env_id": "Nim-v0-raw"}, "perfect", "random-v0", "textarena"),
    (
        "textarena-kuhnpoker-v0",
        _TEXTARENA,
        {"env_id": "KuhnPoker-v0-raw"},
        "hidden",
        "random-v0",
        "textarena",
    ),
):
    registry.register(
        _id,
        _factory,
        kwargs=_kwargs,
        seats=(2, 2),
        kind="competitive",
        information=_information,
        strongest_bot=_strongest,
        requires=_requires,
    )


def make(game_id: str, **kwargs: Any) -> TextGame:
    """Build the game registered as ``game_id``; kwargs override its registered defaults.

    A plugin's game is checked as :func:`spec` checks it first, so one that fails to import or
    is not a :class:`TextGame` raises :class:`GameSpecError` with the reason (one line from the
    CLI), not an error from deep inside whatever first uses it.
    """
    if registry.entry(game_id).plugin is not None:
        spec(game_id)
    return registry.make(game_id, **kwargs)


def ids() -> list[str]:
    """Every registered game id, plugins included, sorted (imports no game module)."""
    return registry.ids()


def spec(game_id: str) -> GameSpec:
    """The :class:`GameSpec` of ``game_id``, without building the game.

    Raises :class:`RegistryError` for an unknown id (naming the nearest ones) and its subclass
    :class:`GameSpecError` for a registered game whose spec cannot be read (a plugin whose
    factory is not a :class:`TextGame`, whose metadata lacks a field, or whose module fails to
    import).
    """
    return GameSpec.from_entry(registry.entry(game_id))
