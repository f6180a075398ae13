"""From Episode records to per-turn samples, and from samples to padded micro-batches.

A :class:`Sample` is one trained turn: the exact prompt and response ids the sampler saw, its
logprobs, the keys that normalize advantages (game, role, seat, group, and agent, derived from
role and seat), the turn-level return G_k and its trajectory's return G_1. Only the trained
policy's own generated tokens are trained on: turns of untrained seats (bots, simulators,
frozen models) yield no sample, and the prompt is masked out. A seat none of whose turns is
trained (or an episode with no trained turn at all) yields no sample.

A :class:`MicroBatch` holds rows ``prompt + response`` right-padded to the longest row. The
model reads ``seq[:-1]`` and predicts ``seq[1:]``; the loss mask selects the targets that are
response tokens. Per-token fields (sampler logprobs, advantages, weights) are flat vectors over
the masked positions in row-major order, which is the order of ``tensor[loss_mask]``.
Rows are sorted by length before packing so that little padding is wasted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

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

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def agent(self) -> str:
        """The seat in self-play (role ``player``), else the role: the default advantage key's
        agent (trainers/advantages.py)."""
        return agent_of(self.role, self.seat)

    def key(self, fields: list[str] | tuple[str, ...]) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in fields)

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def check_turn(turn: Turn, vocab_size: int | None) -> None:
    """Raise :class:`RecordError` for a turn the learner cannot train on safely."""
    where = f"turn {turn.index} of {turn.episode_id}"
    if len(turn.prompt_ids) == 0:
        raise RecordError(f"{where}: empty prompt_ids (the first response token has no context)")
    if len(turn.response_ids) == 0:
        raise RecordError(f"{where}: empty response_ids")
    if not np.all(np.isfinite(turn.response_logprobs)):
        raise RecordError(f"{where}: response_logprobs holds NaN or inf")
    if not math.isfinite(turn.reward):
        raise RecordError(f"{where}: reward {turn.reward} is not finite")
    if vocab_size is not None:
        for name in ("prompt_ids", "response_ids"):
            ids = getattr(turn, name)
            if ids.min() < 0 or ids.max() >= vocab_size:
                raise RecordError(f"{where}: {name} outside the vocabulary [0, {vocab_size})")


def episode_samples(
    episode: Episode, gamma: float, policy: str | None = None, vocab_size: int | None = None
) -> list[Sample]:
    """The samples of one episode's trained turns, with their turn-level returns.

    Returns run over all of a seat's turns in turn order; only turns that are ``trained`` on a
    seat assigned to a trained policy (named ``policy``, when given) become samples. Raises
    :class:`RecordError` for a record the learner cannot use.
    """
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
                    sampler_logprobs=turn.response_logprobs,
                    valid=turn.valid,
                    policy_version=turn.policy_version,
                    ret=float(ret),
                    outcome=float(outcome),
                    traj_return=float(returns[0]),
                )
            )
    return samples


@dataclass
class MicroBatch:
    """Padded rows plus flat per-token fields over the loss mask (see the module docstring)."""

    input_ids: torch.Tensor
    """[B, T] token ids, right-padded."""
    attention_mask: torch.Tensor
    """[B, T] 1 for real tokens."""
    target_ids: torch.Tensor
    """[B, T] the next token of each position."""
    loss_mask: torch.Tensor
    """[B, T] bool: the target is a generated token of this row's turn."""
    sampler_logprobs: torch.Tensor
    """[N] the sampler's logprob of each masked target."""
    advantages: torch.Tensor
    """[N] the turn's advantage, repeated on each of its tokens."""
    weights: torch.Tensor
    """[N] the turn's loss weight, repeated on each of its tokens."""
    seq_index: torch.Tensor
    """[N] the row each token belongs to."""
    seq_lengths: torch.Tensor
    """[N] the response length of the row each token belongs to."""
    samples: list[Sample]
    prox_logprobs: torch.Tensor | None = None
    """[N] the learner's logprobs before this batch's first update (set by the first pass)."""
    ref_logprobs: torch.Tensor | None = None
    """[N] the frozen reference's logprobs (when a KL term is on)."""
    agg_weights: torch.Tensor | None = None
    """[N] each token's aggregation weight over the global batch (trainers/losses.py)."""

    @property
    def num_tokens(self) -> int:
        """Trained (masked) tokens."""
        return int(self.sampler_logprobs.numel())

    @property
    def num_input_tokens(self) -> int:
        """Real input tokens, padding excluded."""
        return int(self.attention_mask.sum())

    def to(self, device: torch.device | str) -> MicroBatch:
        moved = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name, value in moved.items():
            if isinstance(value, torch.Tensor):
                moved[name] = value.to(device, non_blocking=True)
        return MicroBatch(**moved)


def collate(samples: list[Sample], pad_id: int) -> MicroBatch:
    """One micro-batch from ``samples`` (each with a non-empty prompt and response)."""
    width = max(s.num_tokens for s in samples) - 1
    rows = len(samples)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    target_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((rows, width), dtype=torch.long)
    loss_mask = torch.zeros((rows, width), dtype=torch.bool)
    for row, sample in enumerate(samples):
        seq = torch.from_numpy(
            np.concatenate([sample.prompt_ids, sample.response_ids]).astype(np.int64)
        )
        n, start = len(seq) - 1, len(sample.prompt_ids) - 1
        input_ids[row, :n] = seq[:-1]
        target_ids[row, :n] = seq[1:]
        attention_mask[row, :n] = 1
        loss_mask[row, start:n] = True
    lengths = [len(s.response_ids) for s in samples]
    return MicroBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        target_ids=target_ids,
        loss_mask=loss_mask,
        sampler_logprobs=torch.from_numpy(
            np.concatenate([s.sampler_logprobs for s in samples])
        ).float(),
        advantages=torch.tensor(
            np.repeat([s.advantage for s in samples], lengths), dtype=torch.float32
        ),
        weights=torch.tensor(np.repeat([s.weight for s in samples], lengths), dtype=torch.float32),
        seq_index=torch.tensor(np.repeat(np.arange(rows), lengths), dtype=torch.long),
        seq_lengths=torch.tensor(np.repeat(lengths, lengths), dtype=torch.float32),
        samples=list(samples),
    )


def pack(samples: list[Sample], token_budget: int, pad_id: int) -> list[MicroBatch]:
    """Micro-batches of at most ``token_budget`` padded tokens (rows x longest row).

    Longest rows first, so each micro-batch pads to its first row. A sample longer than the
    budget raises; filter overlong turns first.
    """
    order = sorted(range(len(samples)), key=lambda i: (-samples[i].num_tokens, i))
    batches: list[MicroBatch] = []
    current: list[Sample] = []
    width = 0
    for i in order:
        sample = samples[i]
        if sample.num_tokens - 1 > token_budget:
            raise ValueError(
                f"a turn of {sample.num_tokens} tokens exceeds the micro-batch budget {token_budget}"
            )
        if current and (len(current) + 1) * width > token_budget:
            batches.append(collate(current, pad_id))
            current = []
        if not current:
            width = sample.num_tokens - 1
        current.append(sample)
    if current:
        batches.append(collate(current, pad_id))
    return batches


def shard(samples: list[Sample], rank: int, world: int) -> list[Sample]:
    """This rank's share: round-robin over samples sorted by length, so tokens balance."""
    order = sorted(range(len(samples)), key=lambda i: (-samples[i].num_tokens, i))
    return [samples[i] for i in order[rank::world]]
