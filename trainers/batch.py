"""From Episode records to per-turn samples, and from samples to padded micro-batches.

A :class:`Sample` is one trained turn: the exact prompt and response ids the sampler saw, its
logprobs, the keys that normalize advantages (game, role, seat, group, and agent, derived from
role and seat), the turn-level return G_k and its trajectory's return G_1. Only the trained
policy's own generated tokens are trained on: turns of untrained seats (bots, simulators,
frozen models) yield no sample, and the prompt is masked out. A seat none of whose turns is
trained (or an episode with no trained turn at all) yields no sample.

A turn played by choice (``arena/play/choice.py``) keeps every legal reply (``choices``): the
learner scores them all to train the policy over the legal replies. Samples become padded
micro-batches in :mod:`trainers.microbatch`.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arena.records import Episode, RecordError, Turn
from trainers.advantages import agent_of, discounted_returns


@dataclass
class Sample:
    """One trained turn, ready to be batched."""

    episode_id: str
    turn_index: int
    game: str
    role: str
    seat: str
    group: str
    prompt_ids: np.ndarray
    response_ids: np.ndarray
    sampler_logprobs: np.ndarray
    valid: bool
    policy_version: int
    ret: float
    """Turn-level return G_k of this turn (see trainers/advantages.py)."""
    outcome: float
    """The seat's final outcome: ``final_rewards[seat]``, or the sum of the seat's turn rewards
    when the episode lists none for it."""
    advantage: float = 0.0
    weight: float = 1.0
    """Loss weight (below 1 for stale turns in ``downweight`` mode)."""
    traj_return: float | None = None
    """Return R = G_1 of this seat's whole trajectory in the episode (its first turn's return,
    trained or not), which the ``ema`` mode updates its baseline with once per trajectory.
    None when unknown: that mode then uses the trajectory's first sample's ``ret``."""
    choices: list[np.ndarray] | None = None
    """A turn played by choice: the token ids of every legal reply (``response_ids`` is the
    played one, ``choice_index`` its place, ``sampler_logprobs`` the one legal-normalized
    logprob it was drawn with); None for a generated turn."""
    choice_index: int = -1
    adapter: str | None = None
    """The named adapter that played this turn (a run with named policies; None: the base)."""

    @property
    def num_tokens(self) -> int:
        """The longest sequence this turn trains on: prompt and response (or longest reply)."""
        longest = max(len(c) for c in self.choices) if self.choices else len(self.response_ids)
        return len(self.prompt_ids) + longest

    @property
    def prompt(self) -> str:
        """The prompt's identity (a digest of its ids), for the advantage key ``prompt``."""
        return hashlib.blake2b(self.prompt_ids.tobytes(), digest_size=8).hexdigest()

    @property
    def loss_elements(self) -> int:
        """Terms of the loss: one per generated token, one per choice turn."""
        return 1 if self.choices else len(self.response_ids)

    def continuations(self) -> list[np.ndarray]:
        """The sequences scored after the prompt: every legal reply, or the response."""
        return self.choices if self.choices else [self.response_ids]

    @property
    def agent(self) -> str:
        """The seat in self-play (role ``player``), else the role: the default advantage key's
        agent (trainers/advantages.py)."""
        return agent_of(self.role, self.seat)

    def key(self, fields: list[str] | tuple[str, ...]) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in fields)

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


LOGPROB_TOLERANCE = 1e-4
"""How far above 0 a sampler log-probability may be and still be taken as 0 (float error of a
log-softmax in float32/bfloat16). A log-probability is at most 0 (a probability at most 1): a
larger one comes only from a broken backend or a malformed message, and would silently inflate
the importance weights ``exp(new - old)``, so its episode is rejected like one carrying NaN."""


def check_turn(turn: Turn, vocab_size: int | None) -> None:
    """Raise :class:`RecordError` for a turn the learner cannot train on safely: empty ids,
    a token outside the vocabulary, a non-finite reward, or a sampler log-probability
    (``response_logprobs``, ``choice_logprobs``, ``choice_logprob``) that is NaN, infinite or
    above 0 by more than :data:`LOGPROB_TOLERANCE`."""
    where = f"turn {turn.index} of {turn.episode_id}"
    if len(turn.prompt_ids) == 0:
        raise RecordError(f"{where}: empty prompt_ids (the first response token has no context)")
    if len(turn.response_ids) == 0:
        raise RecordError(f"{where}: empty response_ids")
    if not np.all(np.isfinite(turn.response_logprobs)):
        raise RecordError(f"{where}: response_logprobs holds NaN or inf")
    if not math.isfinite(turn.reward):
        raise RecordError(f"{where}: reward {turn.reward} is not finite")
    if not np.all(np.isfinite(turn.choice_logprobs)) or not math.isfinite(turn.choice_logprob):
        raise RecordError(f"{where}: a choice logprob is NaN or inf")
    for name in ("response_logprobs", "choice_logprobs", "choice_logprob"):
        values = np.atleast_1d(np.asarray(getattr(turn, name), dtype=np.float64))
        if len(values) and values.max() > LOGPROB_TOLERANCE:
            raise RecordError(
                f"{where}: {name} holds {values.max():g}, above 0 (a log-probability is at "
                f"most 0; a broken backend or a malformed message)"
            )
    if vocab_size is not None:
        for name in ("prompt_ids", "response_ids", "choice_ids"):
            ids = getattr(turn, name)
            if len(ids) == 0:
                continue
            if ids.min() < 0 or ids.max() >= vocab_size:
                raise RecordError(f"{where}: {name} outside the vocabulary [0, {vocab_size})")


def episode_samples(
    episode: Episode,
    gamma: float,
    policy: str | None = None,
    vocab_size: int | None = None,
    known_policies: Sequence[str] = (),
) -> list[Sample]:
    """The samples of one episode's trained turns, with their turn-level returns.

    Returns run over all of a seat's turns in turn order; only turns that are ``trained`` on a
    seat assigned to a trained policy (named ``policy``, when given) become samples. Raises
    :class:`RecordError` for a record the learner cannot use, and (with ``known_policies``) for
    a trained seat of a policy no learner of the run trains.
    """
    for seat, assignment in episode.seats.items():
        if known_policies and assignment.trained and assignment.policy not in known_policies:
            raise RecordError(
                f"episode {episode.id}: seat {seat!r} is trained as policy "
                f"{assignment.policy!r}, which no learner of the run trains "
                f"({', '.join(known_policies)})"
            )
    for seat, value in episode.final_rewards.items():
        if not math.isfinite(value):
            raise RecordError(f"episode {episode.id}: final reward of {seat!r} is not finite")
    by_seat: dict[str, list[Turn]] = defaultdict(list)
    for turn in sorted(episode.turns, key=lambda t: t.index):
        by_seat[turn.seat].append(turn)
    samples = []
    for seat, turns in by_seat.items():
        assignment = episode.seats[seat]
        if not assignment.trained or (policy is not None and assignment.policy != policy):
            continue
        rewards = [t.reward for t in turns]
        returns = discounted_returns(rewards, gamma)
        outcome = episode.final_rewards.get(seat, float(sum(rewards)))
        for turn, ret in zip(turns, returns, strict=True):
            if not turn.trained:
                continue
            check_turn(turn, vocab_size)
            choosing = turn.is_choice
            samples.append(
                Sample(
                    episode_id=episode.id,
                    turn_index=turn.index,
                    game=turn.game,
                    role=turn.role,
                    seat=seat,
                    group=turn.group,
                    prompt_ids=turn.prompt_ids,
                    response_ids=turn.response_ids,
                    sampler_logprobs=(
                        np.array([turn.choice_logprob], np.float32)
                        if choosing
                        else turn.response_logprobs
                    ),
                    valid=turn.valid,
                    policy_version=turn.policy_version,
                    ret=float(ret),
                    outcome=float(outcome),
                    traj_return=float(returns[0]),
                    choices=turn.choices() if choosing else None,
                    choice_index=turn.choice_index,
                    adapter=assignment.adapter,
                )
            )
    return samples


def shard(samples: list[Sample], rank: int, world: int) -> list[Sample]:
    """This rank's share: round-robin over samples sorted by length, so tokens balance."""
    order = sorted(range(len(samples)), key=lambda i: (-samples[i].num_tokens, i))
    return [samples[i] for i in order[rank::world]]
