"""Whether a bot can play a game, found by playing it once, before anything else starts.

A bot that cannot play a game (``minimax-v0`` on poker: it needs a searchable position) or that
plays an illegal action would otherwise show as failed or forfeited episodes halfway through an
evaluation or a tournament. :func:`cannot_play` plays one game with the bot in one seat and
``random-v0`` in the others, and returns what stopped it, in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import games
import games.bots
from arena.play.config import GameConfig
from games.bots.base import Bot, legal_move


def cannot_play(
    make_bot: Callable[[], Bot], game: GameConfig, taken: Sequence[str] = ()
) -> str | None:
    """Play one game of ``game`` (seed 0) with ``make_bot()`` in the first seat no simulator
    fills and not ``taken`` (a simulated seat is never a bot's: the retail agent bot plays the
    agent, the user simulated; nor is a person's seat in ``arena play``) and ``random-v0`` in every other: None when it ends, else the error that stopped
    it (``TypeError: AlphaBetaBot cannot play kuhn_poker_v0: ...``), or, where the game's own
    code raised, says so (``the game itself failed, not the bot: KeyError: ...``). A bot that
    cannot be built (a plugin that fails to import) raises its own error, which names it."""
    env = games.make(game.id, **game.kwargs)
    own = [a for a in env.possible_agents if a not in game.simulators and a not in taken]
    seat = own[0] if own else env.possible_agents[0]
    bots = {
        agent: make_bot() if agent == seat else games.bots.make("random-v0")
        for agent in env.possible_agents
    }
    try:
        env.reset(seed=0)
    except Exception as err:
        return _game_failed(err)
    while env.agents:
        agent = env.agent_selection
        move = None
        if not (env.terminations[agent] or env.truncations[agent]):
            try:
                move = legal_move(bots[agent], env, agent)
            except Exception as err:
                return f"{type(err).__name__}: {err}"
        try:
            env.step(move)
        except Exception as err:  # a broken (plugin) game is not the bot's fault
            return _game_failed(err)
    return None


def _game_failed(err: Exception) -> str:
    return f"the game itself failed, not the bot: {type(err).__name__}: {err}"
