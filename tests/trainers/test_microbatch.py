"""Shared-prefix micro-batches: the same gradient as one row per sequence, at fewer tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainers.batch import Sample
from trainers.choice import element_logprobs
from trainers.logprobs import TokenLogprobs
from trainers.microbatch import collate, pack, units_of


def generated(prompt: np.ndarray, response: np.ndarray, name: str) -> Sample:
    return Sample(
        episode_id=name,
        turn_index=0,
        game="g",
        role="player",
        seat="player_0",
        group="",
        prompt_ids=prompt,
        response_ids=response,
        sampler_logprobs=np.zeros(len(response), np.float32),
        valid=True,
        policy_version=0,
        ret=0.0,
        outcome=0.0,
    )


def mixed_batch() -> list[Sample]:
    """A GRPO group of three responses to one prompt, a choice turn with three legal replies
    (one of one token), and a sample alone with a longer prompt."""
    rng = np.random.default_rng(0)

    def ids(n: int) -> np.ndarray:
        return rng.integers(5, 1000, n).astype(np.int32)

    group_prompt, choice_prompt = ids(9), ids(7)
    samples = [generated(group_prompt, ids(n), f"g{n}") for n in (3, 1, 5)]
    replies = [ids(2), ids(1), ids(3)]
    choice = generated(choice_prompt, replies[2], "c")
    choice.choices, choice.choice_index = replies, 2
    choice.sampler_logprobs = np.array([-0.4], np.float32)
    return [*samples, choice, generated(ids(15), ids(4), "alone")]


def gradients(model: torch.nn.Module, samples: list[Sample], shared: bool) -> dict:
    model.zero_grad()
    mb = collate(samples, pad_id=0, shared_prefix=shared)
    tokens, entropy = TokenLogprobs(model, temperature=0.8)(*mb.forward_args(), entropy_grad=True)
    lp, h = element_logprobs(tokens, entropy, mb, temperature=0.8)
    weights = torch.linspace(-1.0, 1.0, len(lp))
    ((weights * lp).sum() - 0.1 * h.sum()).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_shared_prefix_gradients_equal_unshared_in_float32(tiny_model) -> None:
    model, _ = tiny_model
    model.float()
    samples = mixed_batch()
    shared, plain = collate(samples, 0, True), collate(samples, 0, False)
    # 3 rows (group, choice, alone) against 3 + 3 + 1 = 7, and fewer real tokens
    assert (shared.input_ids.shape[0], plain.input_ids.shape[0]) == (3, 7)
    assert shared.num_input_tokens < plain.num_input_tokens
    assert torch.equal(shared.sampler_logprobs, plain.sampler_logprobs)
    assert shared.num_tokens == 3 + 1 + 5 + 1 + 4
    a, b = gradients(model, samples, True), gradients(model, samples, False)
    assert a.keys() == b.keys() and len(a) > 0
    worst = max(float((a[n] - b[n]).abs().max()) for n in a)
    assert worst < 1e-5
    assert max(float(g.abs().max()) for g in a.values()) > 1e-3  # the gradient is not nothing


def test_units_split_a_group_too_wide_for_the_budget() -> None:
    samples = mixed_batch()[:3]  # one prompt of 9 tokens; responses of 3, 1 and 5 tokens
    assert units_of(samples) == [[0, 1, 2]]  # 9 + 2 + 0 + 4 = 15 input tokens
    assert units_of(samples, budget=12) == [[0, 1], [2]]
    batches = pack(samples, token_budget=15, pad_id=0)
    assert [len(mb.samples) for mb in batches] == [3] and batches[0].input_ids.shape == (1, 15)
    with pytest.raises(ValueError, match="exceeds the micro-batch budget"):
        pack(mixed_batch()[3:4], token_budget=8, pad_id=0)  # 7 + 1 + 0 + 2 = 10 > 8


def test_each_turn_is_tempered_as_its_adapter_sampled() -> None:
    # mixed_batch: responses of 3, 1 and 5 tokens, a choice turn (replies of 2, 1, 3 tokens)
    # and one of 4 tokens; the 5-token response and the choice turn were played by "hot"
    samples = mixed_batch()
    for sample, adapter in zip(samples, [None, "cold", "hot", "hot", None], strict=True):
        sample.adapter = adapter
    mb = collate(samples, pad_id=0)
    assert mb.temperatures(1.0, {"cold": 1.0}) == (1.0, 1.0)  # nobody differs: plain floats
    token, turn = mb.temperatures(1.0, {"hot": 0.5, "cold": 2.0})
    # generated tokens first, in sample order (3 + 1 + 5 + 4), then the 6 legal-reply tokens
    assert token.tolist() == [1.0] * 3 + [2.0] + [0.5] * 5 + [1.0] * 4 + [1.0] * 6
    assert turn.tolist() == [0.5]
    # logits (0, ln 3) at T = 0.5 and at T = 1: p = 9/10 and 3/4 for the second token; the
    # choice turn's replies with sums (0, -ln 3, -ln 3) at its T = 0.5: pi = (9, 1, 1) / 11
    import math

    from trainers.logprobs import token_logprobs

    logits = torch.tensor([[0.0, math.log(3.0)]] * 2)
    lp, _ = token_logprobs(logits, torch.tensor([1, 1]), torch.tensor([[0.5], [1.0]]))
    torch.testing.assert_close(lp, torch.tensor([math.log(0.9), math.log(0.75)]))
    from trainers.choice import legal_policy

    tokens = torch.zeros(len(mb.targets))
    tokens[mb.reply_tokens] = torch.tensor([0.0, 0.0, -math.log(3.0), -math.log(3.0), 0.0, 0.0])
    log_pi, _ = legal_policy(tokens, mb, turn)
    torch.testing.assert_close(log_pi.exp(), torch.tensor([9 / 11, 1 / 11, 1 / 11]))
