"""Play one game to the end with a bot in every seat: the loop behind evaluation, the conformance
kit's random playthroughs, and the tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from games.bots.base import Bot
from games.text_env import TextGame


@dataclass(frozen=True)
class Outcome:
    """How a finished game went."""

    returns: dict[str, float]
    turns: int
    termination_reason: str
    invalid_counts: dict[str, int]


def play_game(env: TextGame, seats: Mapping[str, Bot], seed: int | None = None) -> Outcome:
    """Reset ``env`` with ``seed`` and step the seats' bots until the game is over."""
    env.reset(seed=seed)
    steps_left = env.max_turns * (env.max_retries + 1) + 1  # a bug must not loop forever
    while not env.is_over:
        if steps_left == 0:
            raise RuntimeError(f"{env.metadata['name']} did not end within its turn limit")
        agent = env.agent_selection
        env.step(seats[agent].act(env, agent))
        steps_left -= 1
    return Outcome(
        returns=dict(env.returns),
        turns=env.turn,
        termination_reason=env.termination_reason,
        invalid_counts={a: info["invalid_count"] for a, info in env.infos.items()},
    )
