"""Reference bots: the evaluation opponents and seat-fillers, with their own registry.

    from games import bots
    bot = bots.make("minimax-v0", seed=0)
    action = bot.act(env, env.agent_selection)
    bots.strongest("connect-four-v0")        # the strongest reference bot for a game

Bot ids (``arena.bots`` is the entry-point group for more):

- ``random-v0``: any game, uniformly over the legal actions.
- ``minimax-v0``: exact alpha-beta (Tic-Tac-Toe, Nim); ``minimax-depth4-v0``: depth 4 with a
  heuristic (Connect Four).
- ``nim-optimal-v0``: exact Nim by nim-sum.
- ``mcts-v0``: OpenSpiel's MCTS, for perfect-information games with an OpenSpiel state.
- ``kuhn-nash-v0``: the exact Kuhn poker equilibrium (``alpha`` in [0, 1/3]).
- ``leduc-cfr-v0``: a CFR+ policy for Leduc hold'em (``iterations``), cached on disk.
- ``tit-for-tat-v0``, ``hanabi-rules-v0``, ``liars-dice-heuristic-v0``,
  ``negotiation-conceder-v0``: rule-based baselines.

A plugin's bot subclasses :class:`games.bots.base.Bot` and registers under ``arena.bots``, e.g.
``"mybot-v0" = "mypkg.bots:MyBot"`` in its ``pyproject.toml``.
"""

from __future__ import annotations

import inspect
from typing import Any

import games
from arena.core.registry import PluginFailed, Registry
from games.bots.base import Bot

__all__ = ["Bot", "make", "registry", "strongest"]

registry: Registry[Bot] = Registry("bot", entry_point_group="arena.bots", base=Bot)
registry.register("random-v0", "games.bots.random_bot:RandomBot")
registry.register("minimax-v0", "games.bots.minimax:AlphaBetaBot")
registry.register("minimax-depth4-v0", "games.bots.minimax:AlphaBetaBot", kwargs={"depth": 4})
registry.register("nim-optimal-v0", "games.bots.nim:NimSumBot")
registry.register("mcts-v0", "games.bots.mcts:MCTSBot")
registry.register("kuhn-nash-v0", "games.bots.kuhn:KuhnNashBot")
registry.register("leduc-cfr-v0", "games.bots.leduc:LeducCFRBot")
registry.register("tit-for-tat-v0", "games.bots.tit_for_tat:TitForTatBot")
registry.register("hanabi-rules-v0", "games.bots.hanabi:HanabiRulesBot")
registry.register("liars-dice-heuristic-v0", "games.bots.liars_dice:LiarsDiceBot")
registry.register("negotiation-conceder-v0", "games.bots.negotiation:ConcedingNegotiator")
registry.register("mae-oracle-v0", "games.bots.mae:MAEOracleBot")
registry.register("retail-agent-v0", "games.bots.retail:RetailAgentBot")
registry.register("planner-scripted-v0", "games.bots.planner:ScriptedPlannerBot")
registry.register("search-scripted-v0", "games.bots.search:SearchBot")


def make(bot_id: str, **kwargs: Any) -> Bot:
    """Build the bot registered as ``bot_id`` (kwargs such as ``seed`` or ``depth`` pass through).

    Arena builds every bot with ``seed``; a plugin bot whose ``__init__`` takes none fails in
    one line naming it (:class:`PluginFailed`), not as a traceback of an argument it refuses."""
    try:
        return registry.make(bot_id, **kwargs)
    except TypeError:
        entry = registry.entry(bot_id)
        if entry.plugin is None or "seed" not in kwargs or takes(registry.load(bot_id), "seed"):
            raise
        raise PluginFailed(
            f"bot {bot_id!r} ({entry.target}, plugin {entry.plugin}): its __init__ takes no "
            "seed; Arena builds every bot with seed=N: take it and pass it on, "
            "super().__init__(seed=seed)"
        ) from None


def takes(factory: Any, name: str) -> bool:
    """Whether ``factory`` accepts a keyword argument ``name`` (by name, or through ``**``)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read: assume it does
        return True
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def strongest(game_id: str, **kwargs: Any) -> Bot:
    """The strongest reference bot for the game registered as ``game_id``
    (its :attr:`games.GameSpec.strongest_bot`)."""
    return make(games.spec(game_id).strongest_bot, **kwargs)
