"""The prefix cache (arena/policies/prefix_cache.py): cached and uncached scores agree, a weight
change forgets the blocks, the LRU bound, a bound below one prompt, the version check, and the
requests of one call scored in one batch.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_prefix_cache.py``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from arena.models.adapter_shape import AdapterShape
from arena.models.lora import adapter_state, add_adapters, load_adapter_state, route
from arena.policies.hf import HFPolicy
from arena.policies.prefix_cache import BLOCK, PrefixCache, StaleCache
from arena.policies.scoring import continuation_logprobs
from arena.policies.types import Prompt, SamplingParams

ATOL = 1e-4
"""fp32: a prefix's keys and values computed in another batch (other padding, another width)
round differently by about 1e-6; 1e-4 leaves headroom."""

BASE = np.random.default_rng(0).integers(1, 1000, size=80).astype(np.int32)


def tokens(*parts: np.ndarray | list[int]) -> np.ndarray:
    return np.concatenate([np.asarray(p, dtype=np.int32) for p in parts])


# prompts sharing prefixes of 0, 20, 40, 70 and 80 tokens with BASE, and two under one block
PROMPTS = [
    tokens(BASE[:20], [5, 6, 7]),
    tokens(BASE[:40], [8]),
    tokens(BASE[:70], [9, 10, 11, 12]),
    tokens(BASE),
    tokens(BASE, BASE[:33]),
    tokens([3, 1, 4, 1, 5]),
    tokens(BASE[:7]),
]
REPLIES = [[tokens([21, 22]), tokens([23])], [tokens([24, 25, 26])], [tokens([27]), tokens([28])]]


def requests(replies_from: int = 0) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Every prompt, each with a set of replies (shifted by ``replies_from`` to make new
    requests of the same prompts, which the score memo does not answer)."""
    return PROMPTS, [REPLIES[(i + replies_from) % len(REPLIES)] for i in range(len(PROMPTS))]


def uncached(model, prompts, replies, adapters=None) -> list[list[np.ndarray]]:
    """The reference: each request alone, no prefix cache."""
    return [
        continuation_logprobs(model, [(p, r)], adapters=[a] if adapters else None)[0]
        for p, r, a in zip(prompts, replies, adapters or [None] * len(prompts), strict=True)
    ]


def assert_close(got, want) -> None:
    for got_replies, want_replies in zip(got, want, strict=True):
        for a, b in zip(got_replies, want_replies, strict=True):
            np.testing.assert_allclose(a, b, atol=ATOL, rtol=0)


def with_adapter(model) -> None:
    """Give the model an adapter ``solver`` that changes its keys and values."""
    shape = AdapterShape(r=2, alpha=4.0, target_modules=("k_proj", "v_proj"))
    add_adapters(model, ["solver"], shape)
    generator = torch.Generator().manual_seed(3)
    state = adapter_state(model, "solver")
    changed = {n: t + torch.randn(t.shape, generator=generator) for n, t in state.items()}
    load_adapter_state(model, "solver", changed)


@pytest.fixture
def model(tiny_model):
    """The tiny model, its tokenizer at ``model.tokenizer_`` (the policies here need one)."""
    model, tokenizer = tiny_model
    model.tokenizer_ = tokenizer
    return model


def test_scores_agree_with_the_cache_on_and_off_in_one_batch_and_across_batches(model) -> None:
    with_adapter(model)
    policy = HFPolicy(model, model.tokenizer_, max_batch=16)
    prompts, replies = requests()
    adapters = [None, "solver", None, "solver", None, None, "solver"]
    # one batch: prompts of one call share prefixes, computed alike in one forward
    got = [s.logprobs for s in policy.score([Prompt(ids=p) for p in prompts], replies, adapters)]
    assert_close(got, uncached(model, prompts, replies, adapters))
    assert policy.prefix_cache is not None and len(policy.prefix_cache) > 0
    # later batches: the same prompts with new replies, then under the other adapter (a block
    # of the base must not serve the adapter, nor the reverse), one request per call
    for shift, flip in ((1, False), (2, True)):
        prompts, replies = requests(shift)
        these = [("solver" if a is None else None) if flip else a for a in adapters]
        reused = policy.prefix_cache.reused_tokens
        for p, r, a in zip(prompts, replies, these, strict=True):
            (one,) = policy.score([Prompt(ids=p)], [r], [a])
            assert_close([one.logprobs], uncached(model, [p], [r], [a]))
        if not flip:
            # every prompt past one block read its blocks back
            assert policy.prefix_cache.reused_tokens - reused >= 16 + 32 + 64 + 64 + 112


def test_generation_with_the_cache_matches_generation_without(model) -> None:
    on = HFPolicy(model, model.tokenizer_, max_batch=4)
    off = HFPolicy(model, model.tokenizer_, max_batch=4, prefix_cache_mb=0)
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    prompts = [Prompt(ids=p) for p in PROMPTS[:4]]
    on.generate(prompts, params)  # fills the cache
    reused = on.prefix_cache.reused_tokens
    for got, want in zip(on.generate(prompts, params), off.generate(prompts, params), strict=True):
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=ATOL, rtol=0)
    assert on.prefix_cache.reused_tokens > reused


@pytest.mark.parametrize("change", ["update_weights", "load_adapter"])
def test_a_weight_change_forgets_the_cached_prefixes(model, change: str) -> None:
    with_adapter(model)
    policy = HFPolicy(model, model.tokenizer_, max_batch=16)
    adapter = "solver" if change == "load_adapter" else None
    prompts, replies = requests()
    policy.score([Prompt(ids=p) for p in prompts], replies, [adapter] * len(prompts))
    held = len(policy.prefix_cache)
    assert held > 0
    generator = torch.Generator().manual_seed(7)
    if change == "update_weights":
        # the keys' projection: cached keys of the old weights would now be wrong
        state = {n: t.clone() for n, t in policy.state_dict().items()}
        for name in state:
            if "k_proj" in name and "lora" not in name:
                state[name] += torch.randn(state[name].shape, generator=generator)
        policy.update_weights(state, version=1)
    else:
        state = policy.adapter_state("solver")
        policy.load_adapter(
            "solver", {n: t + torch.randn(t.shape, generator=generator) for n, t in state.items()}
        )
    assert len(policy.prefix_cache) == 0 and policy.prefix_cache.version == policy.weights
    prompts, replies = requests(1)
    got = policy.score([Prompt(ids=p) for p in prompts], replies, [adapter] * len(prompts))
    # the new weights' numbers, as a model that never cached anything computes them
    want = uncached(model, prompts, replies, [adapter] * len(prompts))
    assert_close([s.logprobs for s in got], want)


def fake_block(value: float) -> torch.Tensor:
    return torch.full((2, 2, 1, BLOCK, 4), float(value))


def test_the_least_recently_used_blocks_go_first_a_chain_from_its_tail() -> None:
    size = fake_block(0).numel() * 4
    cache = PrefixCache(max_bytes=3 * size)
    a = cache.keys(np.arange(2 * BLOCK), None)
    b = cache.keys(np.arange(2 * BLOCK) + 100, None)
    cache.store(a, {0: fake_block(1), 1: fake_block(2)}, 0)
    cache.store(b, {0: fake_block(3), 1: fake_block(4)}, 0)
    # four blocks over a bound of three: a's tail went, its head (touched after it) stays
    assert len(cache) == 3 and cache.bytes == 3 * size
    assert [float(kv[0, 0, 0, 0, 0]) for kv in cache.lookup(a, 0)] == [1.0]
    assert len(cache.lookup(b, 0)) == 2
    # reading a again makes it the most recent: the next block stored evicts b's tail
    cache.store(a, {}, 0)
    c = cache.keys(np.arange(BLOCK) + 500, None)
    cache.store(c, {0: fake_block(5)}, 0)
    assert len(cache.lookup(b, 0)) == 1 and len(cache.lookup(a, 0)) == 1
    assert cache.keys(np.arange(BLOCK), "solver") != cache.keys(np.arange(BLOCK), None)


def test_scores_stay_right_when_a_tiny_bound_keeps_evicting(model) -> None:
    policy = HFPolicy(model, model.tokenizer_, max_batch=16)
    block_bytes = 2 * 2 * 2 * BLOCK * 16 * 4  # layers, keys and values, kv heads, head dim, fp32
    policy.prefix_cache.max_bytes = 7 * block_bytes
    for shift in range(3):
        prompts, replies = requests(shift)
        got = policy.score([Prompt(ids=p) for p in prompts], replies)
        assert_close([s.logprobs for s in got], uncached(model, prompts, replies))
        assert policy.prefix_cache.bytes <= 7 * block_bytes
    assert policy.prefix_cache.reused_tokens > 0


def test_a_bound_below_one_prompt_runs_uncached_and_says_so_once(model, caplog) -> None:
    policy = HFPolicy(model, model.tokenizer_, max_batch=16, prefix_cache_mb=0.001)
    long = [PROMPTS[4]]  # 7 blocks: 57 KB over a 1 KB bound
    with caplog.at_level(logging.WARNING, logger="arena.policies.prefix_cache"):
        for shift in range(2):
            replies = [REPLIES[shift]]
            (got,) = policy.score([Prompt(ids=p) for p in long], replies)
            assert_close([got.logprobs], uncached(model, long, replies))
    assert len(policy.prefix_cache) == 0 and policy.prefix_cache.reused_tokens == 0
    assert len([r for r in caplog.records if "run uncached" in r.getMessage()]) == 1


def test_a_block_is_never_read_under_other_weights(model) -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    keys = cache.keys(np.arange(BLOCK), None)
    cache.store(keys, {0: fake_block(1)}, 0)
    with pytest.raises(StaleCache):
        cache.lookup(keys, 1)
    with pytest.raises(StaleCache):
        cache.store(keys, {}, 1)
    cache.reset(1)
    assert cache.lookup(keys, 1) == []
    # a policy whose weights moved on without dropping its blocks fails rather than misreads
    policy = HFPolicy(model, model.tokenizer_)
    policy.score([Prompt(ids=PROMPTS[3])], [REPLIES[0]])
    policy.weights += 1
    with pytest.raises(StaleCache):
        policy.score([Prompt(ids=PROMPTS[3])], [REPLIES[1]])


def test_the_requests_of_one_call_reach_the_model_in_few_forwards_of_little_padding(model) -> None:
    policy = HFPolicy(model, model.tokenizer_, max_batch=16)
    shapes: list[tuple[int, int]] = []

    def count(_module, _args, kwargs, _out) -> None:
        shapes.append(tuple(kwargs["input_ids"].shape))

    hook = model.get_decoder().register_forward_hook(count, with_kwargs=True)
    try:
        # seven prompts of one length: one forward, each prompt with its replies packed after it
        same = [tokens(BASE[i : i + 30]) for i in range(7)]
        policy.score([Prompt(ids=p) for p in same], [REPLIES[0]] * 7)
        assert shapes == [(7, 30 + 3)]
        # prompts of 5 to 113 tokens: forwards of similar widths, padding at most 1.25x
        shapes.clear()
        prompts, replies = requests()
        policy.score([Prompt(ids=p) for p in prompts], replies)
    finally:
        hook.remove()
    assert sum(rows for rows, _ in shapes) == len(prompts) and len(shapes) < len(prompts)
    real = sum(len(p) + sum(len(r) for r in rs) for p, rs in zip(prompts, replies, strict=True))
    assert sum(rows * width for rows, width in shapes) <= 1.25 * real


def test_packed_replies_score_as_each_alone_after_its_whole_prompt(model) -> None:
    """The reference shares no code with the packed scorer: one plain forward of prompt + reply
    per reply. A reply seeing another reply, or a wrong position, moves its scores by 3e-4 or more."""
    with_adapter(model)
    policy = HFPolicy(model, model.tokenizer_, max_batch=16)
    prompts, replies = requests()
    adapters = [None, "solver", None, "solver", None, None, "solver"]
    policy.score([Prompt(ids=p) for p in prompts], replies, adapters)  # fills the cache
    # later replies of several tokens: theirs must not see the replies before them
    replies = [[tokens([21, 22]), tokens([23, 24, 25]), tokens([26, 27])]] * len(prompts)
    got = [s.logprobs for s in policy.score([Prompt(ids=p) for p in prompts], replies, adapters)]
    assert policy.prefix_cache is not None and policy.prefix_cache.reused_tokens > 0
    for prompt, these, adapter, scored in zip(prompts, replies, adapters, got, strict=True):
        for reply, lp in zip(these, scored, strict=True):
            ids = torch.as_tensor(np.concatenate([prompt, reply]), dtype=torch.long)[None]
            with torch.no_grad(), route(model, [adapter]):
                logits = model(input_ids=ids).logits[0].float()
            want = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1]
            want = want.gather(-1, torch.as_tensor(reply, dtype=torch.long)[:, None])[:, 0]
            np.testing.assert_allclose(lp, want.numpy(), atol=1e-5, rtol=0)


def test_a_request_scores_the_same_alone_in_any_batch_and_past_its_cached_prefix(model) -> None:
    """In bfloat16, where padding alone moves a score by a rounding step: exact equality (a
    tournament's sampled choices must not depend on which other matches were in flight)."""
    model.to(torch.bfloat16)
    with_adapter(model)  # a bf16 base's adapted layers return float32
    prompts, replies = requests()
    adapters = [None, "solver"] * 3 + [None]
    alone = [
        continuation_logprobs(model, [(p, r)], adapters=[a])[0]
        for p, r, a in zip(prompts, replies, adapters, strict=True)
    ]
    batched = continuation_logprobs(
        model, list(zip(prompts, replies, strict=True)), batch_size=16, adapters=adapters
    )
    policy = HFPolicy(model, model.tokenizer_, max_batch=16)
    policy.score([Prompt(ids=p) for p in prompts], requests(1)[1], adapters)  # fills the cache
    scored = policy.score([Prompt(ids=p) for p in prompts], replies, adapters)
    cached = [s.logprobs for s in scored]
    assert policy.prefix_cache is not None and policy.prefix_cache.reused_tokens > 0
    for want, *others in zip(alone, batched, cached, strict=True):
        for got in others:
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)
