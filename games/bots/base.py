"""The reference-bot interface.

A bot fills a seat without being trained: given the environment and the seat it plays, it picks
an action, exactly what a policy-driven seat does after its role has parsed the model's text.
``act`` returns an action ``env.step`` accepts; ``act_text`` the same action as text, for code
that drives seats through ``env.step_text``. A bot reads only what its seat may know: the seat's
observation, the public position of a perfect-information game, or the seat's OpenSpiel
information state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from games.text_env import TextGame


class Bot(ABC):
    """A seat-filler: ``reset(seed)`` once per game or match, then ``act(env, agent)`` per turn."""

    def __init__(self, seed: int | None = None) -> None:
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        """Re-seed the bot's randomness (ties and mixed strategies)."""
        self.rng = np.random.default_rng(seed)

    @abstractmethod
    def act(self, env: TextGame, agent: str) -> Any:
        """A legal action for ``agent``, the agent to move in ``env``."""

    def act_text(self, env: TextGame, agent: str) -> str:
        return env.action_to_text(agent, self.act(env, agent))

    def choose(self, options: Sequence[Any], probs: Sequence[float] | None = None) -> Any:
        """One of ``options`` (uniformly, or with ``probs``), as the option itself."""
        if not options:
            raise ValueError(f"{type(self).__name__} has no legal action to choose from")
        if probs is not None:
            p = np.asarray(probs, dtype=np.float64)
            probs = p / p.sum()
        return options[int(self.rng.choice(len(options), p=probs))]


class ErringBot(Bot):
    """A reference bot that can be made to err: with probability ``error_rate`` per decision
    (:meth:`errs`) it plays a wrong move on purpose, a baseline between perfect and useless."""

    def __init__(self, seed: int | None = None, error_rate: float = 0.0) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate}")
        self.error_rate = float(error_rate)
        super().__init__(seed)

    def errs(self) -> bool:
        """Whether this decision is one of the deliberate mistakes."""
        return self.rng.random() < self.error_rate


class IllegalMove(ValueError):
    """A bot's action that is not one of the legal actions of its seat: the bot's bug."""


def legal_move(bot: Bot, env: TextGame, agent: str) -> Any:
    """``bot.act(env, agent)``, refused with :class:`IllegalMove` when it is not a legal action
    of a game that lists them, so that a bot's bug is named as the bot's (``RaceBot played 7,
    not a legal action of player_0 in race_v0 (legal: 0 'add 1', ...)``) rather than surfacing
    as the game's ``IndexError`` where the action is spelled, or as a forfeit. A free-text game
    judges its own moves when they are stepped."""
    action = bot.act(env, agent)
    if env.free_text:
        return action
    legal = env.legal_actions(agent)
    if any(action is a or _same(action, a) for a in legal):
        return action
    shown = ", ".join(f"{a!r} {env.action_to_text(agent, a)!r}" for a in legal[:8])
    more = f", ... ({len(legal)} in all)" if len(legal) > 8 else ""
    played = int(action) if isinstance(action, np.integer) else action
    raise IllegalMove(
        f"{type(bot).__name__} played {played!r}, not a legal action of {agent} in "
        f"{env.metadata['name']} (legal: {shown or 'none'}{more})"
    )


def _same(action: Any, legal: Any) -> bool:
    try:
        return bool(action == legal)
    except Exception:  # an array compared to an int, say: not that action
        return False


def unsupported(bot: Bot, env: TextGame, needs: str) -> TypeError:
    """The error for a bot asked to play a game it cannot play."""
    return TypeError(f"{type(bot).__name__} cannot play {env.metadata['name']}: it needs {needs}")
