"""Filling the seats of an episode from a :class:`~arena.play.config.PlayConfig`.

Rollout actors and evaluation share one :class:`SeatFactory`: a trained seat is a role agent on
the served policy; the other seats follow the opponent mode (the trained policy again in
self-play, a reference bot in ``fixed`` mode, a past checkpoint in ``population`` mode).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import games
import games.bots
import roles
from arena.play.config import PlayConfig
from arena.play.episode import BotSeat, PolicySeat, Seat
from arena.policies.chat import ChatFormat
from arena.policies.types import SamplingParams


def resolve_opponent(opponent: str, game_id: str) -> str:
    """``strongest`` names each game's strongest reference bot; any other id is itself."""
    return games.spec(game_id).strongest_bot if opponent == "strongest" else opponent


@dataclass(frozen=True)
class Opponent:
    """Who fills the untrained seats of a collect in population mode."""

    policy: str
    """The served policy name (``main``: the current policy; ``pool``: a past checkpoint)."""
    label: str
    """Recorded as the seats' policy, e.g. ``main@7`` or ``pool@step-4``."""


class SeatFactory:
    """Builds the seat fillers of one episode (shared by rollout actors and evaluation)."""

    def __init__(
        self,
        config: PlayConfig,
        policy: Any,
        chat: ChatFormat,
        remote: Callable[[str], Any] | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.chat = chat
        self.remote = remote or (lambda name: policy)
        """Builds the policy served under another name (population opponents)."""
        sampling = config.sampling
        self.params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            max_new_tokens=sampling.max_new_tokens,
        )
        self._games = {g.id: g for g in config.games}

    def policy_seat(
        self,
        game_id: str,
        *,
        trained: bool = True,
        params: SamplingParams | None = None,
        policy: Any = None,
    ) -> PolicySeat:
        game = self._games[game_id]
        role = roles.make(game.role, **game.role_kwargs)
        params = params or self.params
        stop = tuple(dict.fromkeys((*params.stop, *role.stop_strings())))
        return PolicySeat(
            policy=policy or self.policy,
            role=role,
            chat=self.chat,
            params=SamplingParams(**{**params.to_dict(), "stop": stop}),
            policy_name=self.config.policy_name,
            trained=trained,
            invalid_penalty=self.config.invalid_penalty,
        )

    def seats(
        self,
        game_id: str,
        agents: list[str],
        rng: random.Random,
        seed: int,
        opponent: Opponent | None = None,
    ) -> dict[str, Seat]:
        """Seat fillers for one episode. The trained seat is drawn uniformly, so the policy
        plays first and second alike; the others follow the opponent mode."""
        mode = self.config.opponents.mode
        if mode == "self-play":
            return {agent: self.policy_seat(game_id) for agent in agents}
        trained = rng.choice(agents)
        seats: dict[str, Seat] = {trained: self.policy_seat(game_id)}
        for agent in agents:
            if agent == trained:
                continue
            if mode == "population" and opponent is not None:
                seat = self.policy_seat(game_id, trained=False, policy=self.remote(opponent.policy))
                seat.policy_name = opponent.label
                seats[agent] = seat
            else:
                bot_id = resolve_opponent(self.config.opponents.fixed, game_id)
                seats[agent] = BotSeat(games.bots.make(bot_id, seed=seed), bot_id)
        return seats
