"""Samples from records, the loss mask, packing, filters, and the sparse LM-head path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from synthetic import episode, turn, two_seat_episodes

from arena.records import RecordError
from trainers.batch import collate, episode_samples, pack, shard
from trainers.config import BatchConfig
from trainers.filters import apply_staleness, filter_samples
from trainers.logprobs import TokenLogprobs, token_logprobs


def test_only_trained_policy_turns_become_samples() -> None:
    turns = [turn("e", 0, "me"), turn("e", 1, "bot"), turn("e", 2, "me", trained=False),
             turn("e", 3, "me")]  # fmt: skip
    samples = episode_samples(episode("e", turns, untrained=["bot"]), gamma=1.0)
    assert [(s.seat, s.turn_index) for s in samples] == [("me", 0), ("me", 3)]
    # A policy filter keeps only seats assigned to that policy.
    assert episode_samples(episode("e", turns, policy="other"), 1.0, policy="main") == []
    assert len(episode_samples(episode("e", turns), 1.0, policy="main")) == 3


def test_collate_masks_prompts_and_padding() -> None:
    # Row 0: prompt [1 2 3] + response [4 5]: input [1 2 3 4], target [2 3 4 5], mask on 4, 5.
    # Row 1: prompt [7] + response [8 9 10]: input [7 8 9 PAD], target [8 9 10 PAD], mask 8, 9, 10.
    a = turn("e", 0, "p", prompt=[1, 2, 3], response=[4, 5], logprobs=[-0.1, -0.2])
    b = turn("e", 1, "p", prompt=[7], response=[8, 9, 10], logprobs=[-0.3, -0.4, -0.5])
    samples = episode_samples(episode("e", [a, b]), 1.0)
    samples[0].advantage, samples[1].advantage = 1.5, -0.5
    mb = collate(samples, pad_id=0)
    assert mb.input_ids.tolist() == [[1, 2, 3, 4], [7, 8, 9, 0]]
    assert mb.target_ids.tolist() == [[2, 3, 4, 5], [8, 9, 10, 0]]
    assert mb.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert mb.loss_mask.tolist() == [[False, False, True, True], [True, True, True, False]]
    assert mb.target_ids[mb.loss_mask].tolist() == [4, 5, 8, 9, 10]
    assert mb.sampler_logprobs.tolist() == pytest.approx([-0.1, -0.2, -0.3, -0.4, -0.5])
    assert mb.advantages.tolist() == [1.5, 1.5, -0.5, -0.5, -0.5]
    assert mb.seq_index.tolist() == [0, 0, 1, 1, 1]
    assert mb.seq_lengths.tolist() == [2, 2, 3, 3, 3]
    assert mb.num_tokens == 5 and mb.num_input_tokens == 7


def test_pack_respects_the_token_budget_and_keeps_every_sample() -> None:
    samples = [s for e in two_seat_episodes(10) for s in episode_samples(e, 1.0)]
    batches = pack(samples, token_budget=40, pad_id=0)
    assert sum(len(mb.samples) for mb in batches) == len(samples)
    for mb in batches:
        assert mb.input_ids.numel() <= 40
    ids = sorted((s.episode_id, s.turn_index) for mb in batches for s in mb.samples)
    assert ids == sorted((s.episode_id, s.turn_index) for s in samples)
    with pytest.raises(ValueError):
        pack(samples, token_budget=4, pad_id=0)


def test_shard_splits_without_loss_or_overlap() -> None:
    samples = [s for e in two_seat_episodes(5) for s in episode_samples(e, 1.0)]
    parts = [shard(samples, r, 3) for r in range(3)]
    assert sum(len(p) for p in parts) == len(samples)
    assert {id(s) for p in parts for s in p} == {id(s) for s in samples}


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"prompt": []}, "empty prompt"),
        ({"response": [], "logprobs": []}, "empty response"),
        ({"logprobs": [float("nan"), -1.0]}, "NaN"),
        ({"reward": float("inf")}, "not finite"),
        ({"response": [4, 60000]}, "vocabulary"),
        ({"prompt": [-1, 2]}, "vocabulary"),
    ],
)
def test_unusable_turns_raise_record_errors(bad: dict, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        episode_samples(episode("e", [turn("e", 0, "p", **bad)]), 1.0, vocab_size=50000)


def test_staleness_reject_and_downweight() -> None:
    # Learner at version 10, bound 2: lags 0, 2 are fresh; lags 3, 5 exceed it by 1 and 3.
    samples = [s for e in [episode("e", [turn("e", i, "p", version=v) for i, v in enumerate([10, 8, 7, 5])])]
               for s in episode_samples(e, 1.0)]  # fmt: skip
    kept, counts = apply_staleness(samples, 10, BatchConfig(max_staleness=2))
    assert [s.policy_version for s in kept] == [10, 8] and counts["stale_rejected"] == 2
    config = BatchConfig(max_staleness=2, stale_mode="downweight", stale_decay=0.5)
    kept, counts = apply_staleness(samples, 10, config)
    # weights: 1, 1, 0.5^1 = 0.5, 0.5^3 = 0.125
    assert [s.weight for s in kept] == [1.0, 1.0, 0.5, 0.125]
    assert counts["stale_downweighted"] == 2


def test_filters_count_each_reason() -> None:
    turns = [
        turn("e", 0, "p", response=[4, 5, 6, 7]),            # hits max_response_tokens 4
        turn("e", 1, "p", prompt=list(range(1, 30))),        # longer than max_seq_len 20
        turn("e", 2, "p", valid=False),                      # void
        turn("e", 3, "p"),                                   # zero advantage
        turn("e", 4, "p"),                                   # kept
    ]  # fmt: skip
    samples = episode_samples(episode("e", turns), 1.0)
    for s, a in zip(samples, [1.0, 1.0, 1.0, 0.0, 1.0], strict=True):
        s.advantage = a
    config = BatchConfig(max_seq_len=20, micro_batch_tokens=64, max_response_tokens=4, filter_void=True)
    kept, counts = filter_samples(samples, config)
    assert [s.turn_index for s in kept] == [4]
    assert counts == {"overlong": 2, "void": 1, "zero_advantage": 1}
    # With the optional filters off, only the turn that cannot fit is dropped.
    config = BatchConfig(max_seq_len=20, micro_batch_tokens=64, max_response_tokens=4,
                         filter_overlong=False, filter_zero_advantage=False)  # fmt: skip
    kept, counts = filter_samples(samples, config)
    assert len(kept) == 4 and counts == {"overlong": 1}


def test_sparse_head_matches_the_full_forward(tiny) -> None:
    model, _ = tiny
    samples = [s for e in two_seat_episodes(3) for s in episode_samples(e, 1.0)]
    mb = collate(samples, pad_id=0)
    with torch.no_grad():
        sparse_lp, sparse_h = TokenLogprobs(model, sparse=True)(mb.input_ids, mb.attention_mask,
                                                                mb.target_ids, mb.loss_mask)  # fmt: skip
        dense_lp, _ = TokenLogprobs(model, sparse=False)(mb.input_ids, mb.attention_mask,
                                                         mb.target_ids, mb.loss_mask)  # fmt: skip
        # Reference: each row alone, unpadded, through the model's own logits.
        expected = []
        for s in mb.samples:
            seq = torch.tensor(np.concatenate([s.prompt_ids, s.response_ids]), dtype=torch.long)[None]
            logits = model(input_ids=seq[:, :-1]).logits[0, len(s.prompt_ids) - 1 :]
            expected.append(token_logprobs(logits, seq[0, len(s.prompt_ids) :])[0])
    assert sparse_lp.shape == (mb.num_tokens,) and sparse_h.shape == (mb.num_tokens,)
    assert torch.allclose(sparse_lp, dense_lp, atol=1e-4)
    assert torch.allclose(sparse_lp, torch.cat(expected), atol=1e-4)
