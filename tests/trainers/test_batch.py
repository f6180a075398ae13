"""trainers/batch.py: samples from records, collation with its masks, packing under a token
budget, and sharding over ranks, against values worked out by hand.

Run with `.venv/bin/python -m pytest -q tests/trainers/test_batch.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from synthetic import episode, turn, two_seat_episodes

from arena.records import RecordError
from trainers.batch import Sample, episode_samples, shard
from trainers.microbatch import collate, pack


def sized(name: str, prompt: int, response: int) -> Sample:
    """A sample of ``prompt + response`` tokens (ids 1, 2, ...); its row is one shorter."""
    ids = np.arange(1, prompt + response + 1, dtype=np.int32)
    return Sample(
        episode_id=name,
        turn_index=0,
        game="g",
        role="player",
        seat="p0",
        group="",
        prompt_ids=ids[:prompt],
        response_ids=ids[prompt:],
        sampler_logprobs=np.full(response, -1.0, np.float32),
        valid=True,
        policy_version=0,
        ret=0.0,
        outcome=0.0,
    )


# -- samples from records --------------------------------------------------------------------


def test_only_trained_policy_turns_become_samples() -> None:
    turns = [
        turn("e", 0, "me"),
        turn("e", 1, "bot"),
        turn("e", 2, "me", trained=False),
        turn("e", 3, "me"),
    ]
    samples = episode_samples(episode("e", turns, untrained=["bot"]), gamma=1.0)
    assert [(s.seat, s.turn_index) for s in samples] == [("me", 0), ("me", 3)]
    # A policy filter keeps only seats assigned to that policy.
    assert episode_samples(episode("e", turns, policy="other"), 1.0, policy="main") == []
    assert len(episode_samples(episode("e", turns), 1.0, policy="main")) == 3


def test_a_trained_seat_of_a_policy_no_learner_trains_is_a_bad_record() -> None:
    turns = [turn("e", 0, "me"), turn("e", 1, "bot")]
    # a run of several models: its learners train "main" and "responder"
    known = ("main", "responder")
    assert len(episode_samples(episode("e", turns), 1.0, "main", known_policies=known)) == 2
    stray = episode("e", turns, policy="critic")
    with pytest.raises(RecordError, match="'critic', which no learner of the run trains"):
        episode_samples(stray, 1.0, "responder", known_policies=known)
    assert episode_samples(stray, 1.0, "responder") == []  # unchecked: silently nobody's


def test_returns_run_over_each_seat_in_turn_order() -> None:
    # Turns arrive out of order and interleave two seats. With gamma = 0.5:
    #   p0 turns 0, 2, 4 with rewards 0, 0, 1  -> G = 0.25, 0.5, 1
    #   p1 turns 1, 3    with rewards 0.5, -1  -> G = 0.5 + 0.5 * -1 = 0, -1
    turns = [
        turn("e", 4, "p0", reward=1.0),
        turn("e", 1, "p1", reward=0.5),
        turn("e", 0, "p0"),
        turn("e", 3, "p1", reward=-1.0),
        turn("e", 2, "p0"),
    ]
    samples = episode_samples(episode("e", turns, final_rewards={"p0": 1.0}), gamma=0.5)
    got = {(s.seat, s.turn_index): s.ret for s in samples}
    assert got == {("p0", 0): 0.25, ("p0", 2): 0.5, ("p0", 4): 1.0, ("p1", 1): 0.0, ("p1", 3): -1.0}
    # The outcome is final_rewards[seat], or the sum of the seat's turn rewards when the
    # episode lists none for it: p1 has 0.5 - 1 = -0.5.
    assert {s.seat: s.outcome for s in samples} == {"p0": 1.0, "p1": -0.5}


def test_untrained_turns_still_carry_reward_back() -> None:
    # p0's middle turn is not trained (e.g. a forced move), yet its reward 1 is part of the
    # seat's return: gamma = 1 gives G_0 = 0 + 1 + 0 = 1 and G_2 = 0.
    turns = [turn("e", 0, "p0"), turn("e", 1, "p0", reward=1.0, trained=False), turn("e", 2, "p0")]
    samples = episode_samples(episode("e", turns), gamma=1.0)
    assert [(s.turn_index, s.ret) for s in samples] == [(0, 1.0), (2, 0.0)]


def test_sample_fields_come_from_the_turn() -> None:
    t = turn(
        "e",
        0,
        "p1",
        role="judge",
        game="chess",
        prompt=[9, 8],
        response=[7],
        logprobs=[-0.75],
        version=5,
        valid=False,
        group="grp",
    )
    (s,) = episode_samples(episode("e", [t], game="chess"), 1.0)
    assert (s.episode_id, s.turn_index, s.game, s.role, s.seat, s.group) == (
        "e",
        0,
        "chess",
        "judge",
        "p1",
        "grp",
    )
    assert s.prompt_ids.tolist() == [9, 8] and s.response_ids.tolist() == [7]
    assert s.sampler_logprobs.tolist() == [-0.75]
    assert (s.valid, s.policy_version, s.advantage, s.weight) == (False, 5, 0.0, 1.0)
    assert s.num_tokens == 3
    assert s.key(("game", "seat")) == ("chess", "p1")
    assert s.key(["role", "group"]) == ("judge", "grp")
    assert set(s.to_dict()) == set(Sample.__dataclass_fields__) and s.to_dict()["ret"] == 0.0


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"prompt": []}, "empty prompt"),
        ({"response": [], "logprobs": []}, "empty response"),
        ({"logprobs": [float("nan"), -1.0]}, "NaN"),
        # a log-probability above 0 by more than the 1e-4 tolerance: 0.5 (and 0.00011)
        ({"logprobs": [-1.0, 0.5]}, "response_logprobs holds 0.5, above 0"),
        ({"logprobs": [0.00011, -1.0]}, "response_logprobs holds 0.00011, above 0"),
        ({"reward": float("inf")}, "not finite"),
        ({"response": [4, 60000]}, "vocabulary"),
        ({"prompt": [-1, 2]}, "vocabulary"),
    ],
)
def test_unusable_turns_raise_record_errors(bad: dict, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        episode_samples(episode("e", [turn("e", 0, "p", **bad)]), 1.0, vocab_size=50000)


def test_vocabulary_is_checked_only_when_known() -> None:
    ep = episode("e", [turn("e", 0, "p", response=[4, 60000])])
    assert len(episode_samples(ep, 1.0)) == 1
    # 49999 is the last id of a 50000-token vocabulary; 50000 is one past it.
    assert (
        len(
            episode_samples(
                episode("e", [turn("e", 0, "p", response=[49999])]), 1.0, vocab_size=50000
            )
        )
        == 1
    )
    with pytest.raises(RecordError, match="vocabulary"):
        episode_samples(episode("e", [turn("e", 0, "p", response=[50000])]), 1.0, vocab_size=50000)


def test_a_non_finite_final_reward_rejects_the_episode() -> None:
    with pytest.raises(RecordError, match="final reward of 'p'"):
        episode_samples(episode("e", [turn("e", 0, "p")], final_rewards={"p": float("nan")}), 1.0)


# -- collation -------------------------------------------------------------------------------


def test_collate_masks_prompts_and_padding() -> None:
    # Row 0: prompt [1 2 3] + response [4 5]: input [1 2 3 4], target [2 3 4 5], mask on 4, 5.
    # Row 1: prompt [7] + response [8 9 10]: input [7 8 9 PAD], target [8 9 10 PAD], mask 8, 9, 10.
    a = turn("e", 0, "p", prompt=[1, 2, 3], response=[4, 5], logprobs=[-0.1, -0.2])
    b = turn("e", 1, "p", prompt=[7], response=[8, 9, 10], logprobs=[-0.3, -0.4, -0.5])
    samples = episode_samples(episode("e", [a, b]), 1.0)
    samples[0].advantage, samples[1].advantage = 1.5, -0.5
    samples[0].weight, samples[1].weight = 0.25, 1.0
    mb = collate(samples, pad_id=0)
    assert mb.input_ids.tolist() == [[1, 2, 3, 4], [7, 8, 9, 0]]
    assert mb.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert mb.position_ids is None  # plain rows: the model counts positions itself
    # 4 and 5 are predicted at row 0's columns 2 and 3; 8, 9, 10 at row 1's columns 0, 1, 2
    assert mb.predict_at.tolist() == [2, 3, 4, 5, 6]
    assert mb.targets.tolist() == [4, 5, 8, 9, 10]
    assert mb.sampler_logprobs.tolist() == pytest.approx([-0.1, -0.2, -0.3, -0.4, -0.5])
    assert mb.advantages.tolist() == [1.5, 1.5, -0.5, -0.5, -0.5]
    assert mb.weights.tolist() == [0.25, 0.25, 1.0, 1.0, 1.0]
    assert mb.seq_index.tolist() == [0, 0, 1, 1, 1]
    assert mb.seq_lengths.tolist() == [2, 2, 3, 3, 3]
    assert mb.num_tokens == 5 and mb.num_input_tokens == 7
    assert mb.samples == samples and mb.prox_logprobs is None and mb.ref_logprobs is None


def test_collate_pads_with_the_given_id_and_types_its_tensors() -> None:
    # A 1 + 1 token row beside a 2 + 2 one: width 3; the short row is [1, PAD, PAD].
    mb = collate([sized("long", 2, 2), sized("short", 1, 1)], pad_id=99)
    assert mb.input_ids.tolist() == [[1, 2, 3], [1, 99, 99]]
    assert mb.predict_at.tolist() == [1, 2, 3] and mb.targets.tolist() == [3, 4, 2]
    assert (mb.input_ids.dtype, mb.targets.dtype, mb.attention_mask.dtype) == (torch.long,) * 3
    assert (mb.choice_token.dtype, mb.sampler_logprobs.dtype, mb.advantages.dtype) == (
        torch.bool,
        torch.float32,
        torch.float32,
    )
    # The flat per-element fields line up with the scored tokens: one entry per target.
    assert len(mb.targets) == mb.num_tokens == 3


def test_micro_batch_to_moves_tensors_and_keeps_the_rest() -> None:
    mb = collate([sized("a", 2, 2)], pad_id=0)
    mb.agg_weights = torch.ones(mb.num_tokens)
    moved = mb.to("cpu")
    assert moved is not mb and moved.samples == mb.samples
    assert torch.equal(moved.input_ids, mb.input_ids) and torch.equal(
        moved.agg_weights, mb.agg_weights
    )
    assert moved.prox_logprobs is None


# -- packing and sharding --------------------------------------------------------------------


def test_pack_fills_micro_batches_longest_first_by_hand() -> None:
    # Rows (num_tokens - 1): a 6, b 4, c 4, d 3, e 2; budget 12 padded tokens.
    #   a starts a batch at width 6; b makes 2 x 6 = 12 <= 12; c would make 3 x 6 = 18: flush.
    #   c starts a batch at width 4; d makes 2 x 4 = 8; e makes 3 x 4 = 12 <= 12.
    # (b and c tie at width 4; b comes first because it comes first in the input.)
    samples = [
        sized("e", 2, 1),
        sized("b", 3, 2),
        sized("a", 4, 3),
        sized("d", 2, 2),
        sized("c", 3, 2),
    ]
    # one row per sample (the prompts here repeat: shared, b and c would share a row)
    batches = pack(samples, token_budget=12, pad_id=0, shared_prefix=False)
    assert [[s.episode_id for s in mb.samples] for mb in batches] == [["a", "b"], ["c", "d", "e"]]
    assert [tuple(mb.input_ids.shape) for mb in batches] == [(2, 6), (3, 4)]


def test_pack_ties_keep_input_order() -> None:
    # Four rows of width 3, budget 6: two per batch, in the order given.
    samples = [sized(name, 2, 2) for name in "wxyz"]
    batches = pack(samples, token_budget=6, pad_id=0, shared_prefix=False)
    assert [[s.episode_id for s in mb.samples] for mb in batches] == [["w", "x"], ["y", "z"]]


def test_pack_respects_the_token_budget_and_keeps_every_sample() -> None:
    samples = [s for e in two_seat_episodes(10) for s in episode_samples(e, 1.0)]
    batches = pack(samples, token_budget=40, pad_id=0)
    assert sum(len(mb.samples) for mb in batches) == len(samples)
    for mb in batches:
        assert mb.input_ids.numel() <= 40
    ids = sorted((s.episode_id, s.turn_index) for mb in batches for s in mb.samples)
    assert ids == sorted((s.episode_id, s.turn_index) for s in samples)


def test_pack_budget_edges() -> None:
    # A row exactly as wide as the budget fits alone; one token wider raises.
    (mb,) = pack([sized("a", 3, 2)], token_budget=4, pad_id=0)
    assert mb.input_ids.shape == (1, 4)
    with pytest.raises(ValueError, match="exceeds the micro-batch budget 3"):
        pack([sized("a", 3, 2)], token_budget=3, pad_id=0)
    assert pack([], token_budget=8, pad_id=0) == []


def test_shard_balances_tokens_round_robin_by_hand() -> None:
    # num_tokens 3, 7, 5, 5, 4 -> longest first, ties by index: 1 (7), 2 (5), 3 (5), 4 (4), 0 (3)
    # world 2: rank 0 takes positions 0, 2, 4 -> samples 1, 3, 0 (15 tokens);
    #          rank 1 takes positions 1, 3    -> samples 2, 4    (9 tokens).
    samples = [sized(str(i), n - 1, 1) for i, n in enumerate([3, 7, 5, 5, 4])]
    assert [s.episode_id for s in shard(samples, 0, 2)] == ["1", "3", "0"]
    assert [s.episode_id for s in shard(samples, 1, 2)] == ["2", "4"]
    assert shard(samples, 0, 1) == [samples[i] for i in (1, 2, 3, 4, 0)]
    # More ranks than samples: the extra ranks get nothing.
    assert [len(shard(samples[:2], r, 4)) for r in range(4)] == [1, 1, 0, 0]


def test_shard_splits_without_loss_or_overlap() -> None:
    samples = [s for e in two_seat_episodes(5) for s in episode_samples(e, 1.0)]
    parts = [shard(samples, r, 3) for r in range(3)]
    assert sum(len(p) for p in parts) == len(samples)
    assert {id(s) for p in parts for s in p} == {id(s) for s in samples}
