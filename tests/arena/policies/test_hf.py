"""The transformers backend on the tiny model: logprobs, sampling params, stops, weight updates.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_hf.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arena.policies.hf import HFPolicy
from arena.policies.types import ContextOverflow, Generation, InvalidRequest, Prompt, SamplingParams
from trainers.batch import Sample
from trainers.logprobs import TokenLogprobs
from trainers.microbatch import collate

LOGPROB_ATOL = 1e-4
"""fp32 batched, left-padded, KV-cached decoding vs one unpadded teacher-forced pass: the
kernels sum in different orders, so logprobs agree to about 1e-6; 1e-4 leaves headroom."""

CHATS = [
    [{"role": "user", "content": "hi"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name three prime numbers, please."},
    ],
    np.array([1, 504, 2988, 288], dtype=np.int32),
]


@pytest.fixture
def policy(tiny_model) -> HFPolicy:
    model, tokenizer = tiny_model
    return HFPolicy(model, tokenizer, max_batch=2)  # max_batch 2: three prompts span two batches


def teacher_forced(model: torch.nn.Module, gen: Generation, temperature: float = 1.0) -> np.ndarray:
    """log_softmax(logits / T) of the sampled tokens, from one unpadded forward."""
    ids = torch.from_numpy(gen.conversation_ids.astype(np.int64))[None]
    with torch.no_grad():
        logprobs = (model(ids).logits.float() / temperature).log_softmax(-1)[0]
    start = len(gen.prompt_ids)
    return logprobs[start - 1 : -1].gather(1, ids[0, start:, None]).squeeze(1).numpy()


def learner_logprobs(
    model: torch.nn.Module, generations: list[Generation], temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the learner's recomputed logprobs, the sampler's) of every sampled token: the samples
    batched as the learner batches them (right-padded rows) through its own logprob module."""
    samples = [
        Sample(
            episode_id="e",
            turn_index=i,
            game="g",
            role="r",
            seat="s",
            group="g",
            prompt_ids=gen.prompt_ids,
            response_ids=gen.token_ids,
            sampler_logprobs=gen.logprobs,
            valid=True,
            policy_version=gen.version,
            ret=0.0,
            outcome=0.0,
        )
        for i, gen in enumerate(generations)
    ]
    mb = collate(samples, pad_id=0)
    with torch.no_grad():
        logprobs, _ = TokenLogprobs(model, temperature)(*mb.forward_args())
    return logprobs, mb.sampler_logprobs


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0, max_new_tokens=12, seed=1),
        SamplingParams(temperature=0.7, top_k=20, top_p=0.9, max_new_tokens=12),
        SamplingParams(temperature=0.0, max_new_tokens=12),
    ],
    ids=["plain", "truncated", "greedy"],
)
def test_logprobs_match_teacher_forcing(policy: HFPolicy, params: SamplingParams) -> None:
    """Tempered, untruncated logprobs (T = 1 for greedy), whatever top-k/top-p cut."""
    generations = policy.generate(CHATS, params)
    temperature = params.temperature or 1.0
    for gen in generations:
        assert len(gen.token_ids) == len(gen.logprobs) > 0
        np.testing.assert_allclose(
            gen.logprobs, teacher_forced(policy.model, gen, temperature), atol=LOGPROB_ATOL
        )


def test_learner_recomputes_the_logprobs_of_the_distribution_that_sampled(
    policy: HFPolicy,
) -> None:
    """Sampled at T = 0.7, the learner's logprobs at loss.temperature 0.7 agree with the
    sampler's; at T = 1 (the learner's old setting) they do not, so the check has power."""
    params = [SamplingParams(temperature=0.7, max_new_tokens=16, seed=s) for s in range(6)]
    generations = policy.generate(CHATS * 2, params)
    recomputed, reported = learner_logprobs(policy.model, generations, temperature=0.7)
    assert recomputed.numel() == sum(len(g.token_ids) for g in generations) > 30
    assert (recomputed - reported).abs().max() < LOGPROB_ATOL
    at_one, _ = learner_logprobs(policy.model, generations, temperature=1.0)
    assert (at_one - reported).abs().max() > 1e-3


def test_greedy_is_argmax_and_seeds_reproduce(policy: HFPolicy) -> None:
    greedy = policy.generate(CHATS[:1], SamplingParams(temperature=0, max_new_tokens=8))[0]
    reference = policy.model.generate(
        torch.from_numpy(greedy.prompt_ids.astype(np.int64))[None],
        max_new_tokens=8,
        do_sample=False,
        attention_mask=torch.ones(1, len(greedy.prompt_ids), dtype=torch.long),
        eos_token_id=None,
    )[0, len(greedy.prompt_ids) :]
    assert greedy.token_ids.tolist() == reference.tolist()[: len(greedy.token_ids)]
    seeded = [SamplingParams(max_new_tokens=10, seed=s) for s in (5, 5, 6)]
    a, b, c = policy.generate([CHATS[1]] * 3, seeded)
    assert a.token_ids.tolist() == b.token_ids.tolist() != c.token_ids.tolist()


def test_per_request_params_in_one_batch(policy: HFPolicy) -> None:
    short, long = policy.generate(
        CHATS[:2], [SamplingParams(max_new_tokens=3), SamplingParams(max_new_tokens=9)]
    )
    assert (len(short.token_ids), short.finish_reason) == (3, "length")
    assert (len(long.token_ids), long.finish_reason) == (9, "length")
    assert short.version == long.version == 0


def test_stop_strings_and_stop_tokens(policy: HFPolicy) -> None:
    free = policy.generate(CHATS[:1], SamplingParams(temperature=0, max_new_tokens=10))[0]
    third = int(free.token_ids[2])
    by_token = policy.generate(
        CHATS[:1], SamplingParams(temperature=0, max_new_tokens=10, stop_token_ids=[third])
    )[0]
    first = free.token_ids.tolist().index(third)
    assert (
        by_token.finish_reason == "stop"
        and by_token.token_ids.tolist() == free.token_ids[: first + 1].tolist()
    )
    stop = free.text[len(free.text) // 2 :][:3]
    by_text = policy.generate(
        CHATS[:1], SamplingParams(temperature=0, max_new_tokens=10, stop=[stop])
    )[0]
    assert by_text.finish_reason == "stop"
    assert by_text.text == free.text[: free.text.index(stop)]
    assert free.token_ids.tolist()[: len(by_text.token_ids)] == by_text.token_ids.tolist()


def test_prompt_errors(policy: HFPolicy) -> None:
    with pytest.raises(ContextOverflow, match="leaves no room"):
        policy.generate([np.ones(policy.max_context, dtype=np.int32)])
    with pytest.raises(InvalidRequest, match="empty prompt"):
        policy.generate([Prompt(ids=np.zeros(0, np.int32))])


def test_weight_update_changes_outputs_and_version(policy: HFPolicy) -> None:
    params = SamplingParams(temperature=0, max_new_tokens=8)
    before = policy.generate(CHATS[:2], params)
    state = {name: t.clone() for name, t in policy.state_dict().items()}
    generator = torch.Generator().manual_seed(1)
    for tensor in state.values():
        tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.5)
    policy.update_weights(state, version=4)
    after = policy.generate(CHATS[:2], params)
    assert [g.version for g in after] == [4, 4]
    assert any(
        a.token_ids.tolist() != b.token_ids.tolist() for a, b in zip(before, after, strict=True)
    )
    for gen in after:
        np.testing.assert_allclose(
            gen.logprobs, teacher_forced(policy.model, gen), atol=LOGPROB_ATOL
        )
    with pytest.raises(KeyError, match="lacks"):
        policy.update_weights({"nope": torch.zeros(1)}, version=5)
    assert policy.version == 4


def test_make_policy_builds_the_hf_backend() -> None:
    from arena.policies import PolicyConfig, make_policy

    policy = make_policy(PolicyConfig(backend="hf", model="tiny", name="p", max_batch=4, seed=1))
    assert isinstance(policy, HFPolicy) and (policy.name, policy.max_batch) == ("p", 4)
    assert len(policy.generate([[1, 2, 3]], SamplingParams(max_new_tokens=2))[0].token_ids) <= 2
