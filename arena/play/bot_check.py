"""Whether a bot can play a game, found by playing it once, before anything else starts.

A bot that cannot play a game (``minimax-v0`` on poker: it needs a searchable position) or that
plays an illegal action would otherwise show as failed or forfeited episodes halfway through an
evaluation or a tournament. :func:`cannot_play` plays one game with the bot in one seat and
``random-v0`` in the others, and returns what stopped it, in one line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import games
import games.bots
from arena.play.config import MAX_EPISODE_TURNS, GameConfig
from games.bots.base import Bot, legal_move
from games.text_env import TextGame

TRIAL_TIMEOUT = 120.0
"""Seconds the trial game may take. Bots are synchronous, so one that never returns (a plugin's
``act`` waiting on something that never comes) would hold the command before anything starts,
saying nothing; the shipped bots play a trial game in well under a second."""


def cannot_play(
    make_bot: Callable[[], Bot],
    game: GameConfig,
    taken: Sequence[str] = (),
    *,
    timeout: float = TRIAL_TIMEOUT,
) -> str | None:
    """Play one game of ``game`` (seed 0) with ``make_bot()`` in the first seat no simulator
    fills and not ``taken`` (a simulated seat is never a bot's: the retail agent bot plays the
    agent, the user simulated; nor is a person's seat in ``arena play``) and ``random-v0`` in every other: None when it ends, else the error that stopped
    it (``TypeError: AlphaBetaBot cannot play kuhn_poker_v0: ...``), or, where the game's own
    code raised, says so (``the game itself failed, not the bot: KeyError: ...``). A bot that
    cannot be built (a plugin that fails to import) raises its own error, which names it. The
    trial is bounded
    as an episode is: a game not over after :data:`MAX_EPISODE_TURNS` turns (one that never
    ends), and a trial still playing after ``timeout`` seconds (a bot that never answers: it is
    left on a daemon thread, as a synchronous ``act`` cannot be interrupted), say so."""
    env = games.make(game.id, **game.kwargs)
    own = [a for a in env.possible_agents if a not in game.simulators and a not in taken]
    seat = own[0] if own else env.possible_agents[0]
    bots = {
        agent: make_bot() if agent == seat else games.bots.make("random-v0")
        for agent in env.possible_agents
    }
    outcome: list[str | None] = []
    trial = threading.Thread(
        target=lambda: outcome.append(_trial(env, bots)), name="bot-trial", daemon=True
    )
    trial.start()
    trial.join(timeout)
    if not outcome:
        return (
            f"the trial game (seed 0, against random-v0) was still playing after {timeout:g} s: "
            f"a bot that never answers? (last to move: {env.agent_selection}, "
            f"{type(bots[env.agent_selection]).__name__})"
        )
    return outcome[0]


def _trial(env: TextGame, bots: Mapping[str, Bot]) -> str | None:
    """Play ``env`` from ``reset(seed=0)`` with ``bots``: None, or what stopped the game."""
    try:
        env.reset(seed=0)
    except Exception as err:
        return _game_failed(err)
    turns = 0
    while env.agents:
        agent = env.agent_selection
        move = None
        if not (env.terminations[agent] or env.truncations[agent]):
            if turns >= MAX_EPISODE_TURNS:
                return (
                    f"the trial game (seed 0, against random-v0) is not over after {turns} "
                    f"turns, the bound on one episode: a game that never ends (max_turns "
                    f"{env.max_turns})"
                )
            try:
                move = legal_move(bots[agent], env, agent)
            except Exception as err:
                return f"{type(err).__name__}: {err}"
            turns += 1
        try:
            env.step(move)
        except Exception as err:  # a broken (plugin) game is not the bot's fault
            return _game_failed(err)
    return None


def _game_failed(err: Exception) -> str:
    return f"the game itself failed, not the bot: {type(err).__name__}: {err}"
