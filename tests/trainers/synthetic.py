"""Hand-made Episode records and small learner configs for the trainer tests (no games: trainers
learn from records). Each turn comes from :func:`arena.records.synthetic_turn`, the builder
``bench/learner.py`` uses too; ``turn`` is that builder under its old name."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from arena.records import Episode, SeatAssignment, Turn
from arena.records import synthetic_turn as turn
from trainers.config import LearnerConfig


def episode(
    episode_id: str,
    turns: list[Turn],
    *,
    game: str = "g",
    roles: dict[str, str] | None = None,
    untrained: Sequence[str] = (),
    final_rewards: dict[str, float] | None = None,
    policy: str = "main",
) -> Episode:
    seats = {t.seat for t in turns}
    roles = roles or {}
    return Episode(
        id=episode_id,
        game=game,
        seed=0,
        seats={
            s: SeatAssignment(
                role=roles.get(s, "player"), policy=policy, trained=s not in untrained
            )
            for s in sorted(seats)
        },
        turns=turns,
        final_rewards=dict(final_rewards or {}),
        termination="done",
    )


def bandit_episode(
    episode_id: str,
    prompt: Sequence[int],
    token: int,
    logprob: float,
    reward: float,
    version: int = 0,
) -> Episode:
    """A one-turn, one-seat episode: the policy answered ``token`` to ``prompt``."""
    t = turn(
        episode_id,
        0,
        "p0",
        prompt=prompt,
        response=[token],
        logprobs=[logprob],
        reward=reward,
        version=version,
        group="bandit",
    )
    return episode(episode_id, [t], final_rewards={"p0": reward})


def two_seat_episodes(count: int, start: int = 0, version: int = 0) -> list[Episode]:
    """Small two-seat games with varied rewards and lengths (for learner plumbing tests)."""
    rng = np.random.default_rng(start)
    out = []
    for e in range(start, start + count):
        eid = f"ep{e}"
        turns = []
        for k in range(4):
            seat = f"p{k % 2}"
            prompt = rng.integers(3, 500, size=int(rng.integers(3, 12)))
            response = rng.integers(3, 500, size=int(rng.integers(1, 6)))
            lps = -rng.uniform(0.5, 3.0, size=len(response))
            reward = float(rng.choice([-1.0, 0.0, 1.0])) if k >= 2 else 0.0
            turns.append(
                turn(
                    eid,
                    k,
                    seat,
                    prompt=prompt,
                    response=response,
                    logprobs=lps,
                    reward=reward,
                    version=version,
                )
            )
        out.append(episode(eid, turns))
    return out


def make_config(micro_batch_tokens: int = 256, **sections: dict) -> LearnerConfig:
    """Small test defaults (lr 1e-3, 64-token sequences), with per-section overrides."""
    data: dict = {
        "optim": {"lr": 1e-3},
        "batch": {"micro_batch_tokens": micro_batch_tokens, "max_seq_len": 64},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return LearnerConfig.from_dict(data)


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of every parameter, by name."""
    return {n: p.detach().clone() for n, p in model.named_parameters()}
