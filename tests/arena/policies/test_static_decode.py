"""The static-cache decoder against the per-token loop: the same tokens and logprobs for greedy
and seeded requests, in a batch of mixed prompt lengths, adapters and stop criteria.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_static_decode.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from arena.models.adapter_shape import AdapterShape
from arena.models.lora import adapter_parameters, add_adapters
from arena.policies.hf import HFPolicy
from arena.policies.sampling import BatchSampler
from arena.policies.static_decode import bucket, columns, wanted
from arena.policies.types import Prompt, SamplingParams

LOGPROB_ATOL = 1e-4
"""fp32: the two paths attend over differently padded caches and batch sizes, so kernels sum
in different orders (measured differences about 1e-6)."""

SHAPE = AdapterShape(r=2, alpha=4.0, target_modules=("q_proj", "v_proj"))
LENGTHS = [3, 9, 17, 30, 5]
"""Prompt lengths: shorter and longer than a prefix-cache block (16), left-padded together."""


def prompts() -> list[Prompt]:
    generator = np.random.default_rng(3)
    return [Prompt(ids=generator.integers(3, 40000, size=n).astype(np.int32)) for n in LENGTHS]


def policies(tiny_model, max_batch: int = 8) -> tuple[HFPolicy, HFPolicy]:
    """(loop, static) over one model holding a trained-looking adapter ``a``."""
    model, tokenizer = tiny_model
    add_adapters(model, ["a"], SHAPE)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for param in adapter_parameters(model, "a"):
            param.add_(torch.randn(param.shape, generator=generator) * 0.5)
    loop = HFPolicy(model, tokenizer, max_batch=max_batch, static_decode="off")
    static = HFPolicy(model, tokenizer, max_batch=max_batch, static_decode="on")
    assert loop.static is None and static.static is not None
    return loop, static


def assert_same(got, want) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.token_ids, w.token_ids)
        np.testing.assert_allclose(g.logprobs, w.logprobs, atol=LOGPROB_ATOL, rtol=0)
        assert (g.finish_reason, g.text) == (w.finish_reason, w.text)


def test_same_tokens_and_logprobs_as_the_loop(tiny_model) -> None:
    loop, static = policies(tiny_model)
    adapters = ["a", None, "a", None, "a"]
    greedy = [
        SamplingParams(temperature=0, max_new_tokens=n, adapter=a)
        for n, a in zip([12, 3, 20, 7, 1], adapters, strict=True)
    ]
    seeded = [
        SamplingParams(temperature=t, max_new_tokens=14, seed=s, adapter=a, top_k=k)
        for t, s, a, k in zip(
            [1.0, 0.7, 1.3, 1.0, 0.5], range(5), adapters, [0, 0, 50, 0, 0], strict=True
        )
    ]
    lengths = []
    for params in (greedy, seeded):
        want = loop.generate(prompts(), params)
        got = static.generate(prompts(), params)
        assert_same(got, want)
        lengths.append([len(g.token_ids) for g in want])
    # rows finished at different lengths, so the batch outlived some rows
    assert lengths[0] == [12, 3, 20, 7, 1]
    # the adapter moves a row's logprobs, so routing was exercised
    a, base = (
        static.generate([prompts()[1]], SamplingParams(temperature=0, max_new_tokens=4, adapter=x))
        for x in ("a", None)
    )
    assert not np.allclose(a[0].logprobs, base[0].logprobs, atol=1e-3)


def test_stop_ids_stop_strings_and_the_default_adapter(tiny_model) -> None:
    loop, static = policies(tiny_model, max_batch=2)  # five prompts: three batches
    for policy in (loop, static):
        policy.serve_by_default("a")
    first = loop.generate(prompts(), SamplingParams(temperature=0, max_new_tokens=10))
    # stop on each row's third greedy token (through the default adapter, as below), and on
    # text the fourth row produced
    stop_ids = tuple(int(g.token_ids[2]) for g in first if len(g.token_ids) > 2)
    text = first[3].text[2:5]
    params = [
        SamplingParams(temperature=0.9, max_new_tokens=10, seed=11, stop_token_ids=stop_ids),
        SamplingParams(temperature=0, max_new_tokens=10, stop_token_ids=stop_ids),
        SamplingParams(temperature=0, max_new_tokens=10, stop=(text,)),
        SamplingParams(temperature=0, max_new_tokens=10, stop=(text,)),
        SamplingParams(temperature=1.0, max_new_tokens=10, seed=5),
    ]
    want = loop.generate(prompts(), params)
    got = static.generate(prompts(), params)
    assert_same(got, want)
    assert want[1].finish_reason == "stop" and len(want[1].token_ids) <= 3


class HostSyncs(TorchDispatchMode):
    """Records the ops that would make the host wait for the device on CUDA: reading a value
    (``.item()``, ``bool(tensor)``, ``torch.equal``) or a shape that depends on the data."""

    SYNCS = (
        torch.ops.aten._local_scalar_dense.default,
        torch.ops.aten.is_nonzero.default,
        torch.ops.aten.equal.default,
        torch.ops.aten.nonzero.default,
        torch.ops.aten.masked_select.default,
    )

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func in self.SYNCS:
            self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def test_a_decoding_step_never_waits_for_the_device(tiny_model) -> None:
    """What a CUDA graph needs and what keeps the GPU busy: a step (forward through mixed
    adapters, top-k sampling, the writes) reads nothing back, here checked on CPU by op."""
    _, static = policies(tiny_model)
    params = [
        SamplingParams(temperature=0.8, max_new_tokens=6, seed=1, top_k=20, adapter=a)
        for a in ("a", None, "a", None, "a")
    ]
    static.generate(prompts(), params)
    (shape,) = static.static._shapes.values()
    assert shape.masks and shape.truncate and shape.rows == 8  # the step under test routes
    with torch.inference_mode(), HostSyncs() as syncs:  # as the decoder runs it
        shape.forward(static.model)
    assert syncs.seen == []
    with HostSyncs() as syncs:  # the probe works: the loop path's step does read back
        loop_sampler = BatchSampler(params, torch.Generator())
        loop_sampler(torch.randn(5, 100))
    assert syncs.seen


def test_settings_and_buckets(tiny_model) -> None:
    model, _ = tiny_model
    cpu = torch.device("cpu")
    assert not wanted("auto", model, cpu)
    assert wanted("on", model, cpu)
    assert not wanted("off", model, torch.device("cuda"))
    assert wanted("auto", model, torch.device("cuda"))
    with pytest.raises(ValueError, match="static_decode: 'yes' is not one of auto, on, off"):
        wanted("yes", model, cpu)
    model.config._attn_implementation = "flash_attention_2"
    assert not wanted("auto", model, torch.device("cuda"))
    with pytest.raises(ValueError, match="'flash_attention_2' takes no additive mask"):
        wanted("on", model, cpu)
    assert [bucket(n) for n in (1, 3, 64, 65, 1024, 1025)] == [1, 4, 64, 128, 1024, 2048]
    assert [columns(n) for n in (1, 128, 129, 300, 513)] == [128, 128, 256, 512, 1024]


def test_a_bfloat16_model_serving_adapters(tiny_model) -> None:
    """A bf16 model that holds adapters (what a GPU serves: inference.dtype bfloat16 with the
    per-state LoRA) computes its attention in float32 (arena.models.lora.LoRALinear returns
    float32), so the static cache and mask must be float32 too: a bf16 cache failed the first
    step (index_copy_ of float32 keys into it), with or without an adapter routed."""
    model, tokenizer = tiny_model
    model.to(torch.bfloat16)
    add_adapters(model, ["a"], AdapterShape(r=2, alpha=4.0))  # every projection
    loop = HFPolicy(model, tokenizer, max_batch=8, static_decode="off")
    static = HFPolicy(model, tokenizer, max_batch=8, static_decode="on")
    params = [
        SamplingParams(temperature=0, max_new_tokens=6, adapter=a)
        for a in ("a", None, "a", None, "a")
    ]
    want = loop.generate(prompts(), params)
    got = static.generate(prompts(), params)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.token_ids, w.token_ids)
        np.testing.assert_allclose(g.logprobs, w.logprobs, atol=0.05, rtol=0)
    (shape,) = static.static._shapes.values()
    assert shape.cache.layers[0].keys.dtype == torch.float32 == shape.dtype


def test_shapes_are_kept_most_recent_first_up_to_max_shapes(tiny_model) -> None:
    """Each (rows, columns, adapters, truncation, dtype) gets its buffers (and, on CUDA, its
    graph) once; past MAX_SHAPES the least recently used is dropped, not the one in use."""
    from arena.policies.static_decode import MAX_SHAPES, StaticDecoder

    decoder = StaticDecoder(tiny_model[0])
    assert decoder.graphs is False  # CUDA graphs on CUDA only
    keys = [
        (rows, cols, (), False, torch.float32)
        for cols in (128, 256)
        for rows in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    ]
    first = decoder._shape(keys[0])
    for key in keys[1:MAX_SHAPES]:
        decoder._shape(key)
    assert decoder._shape(keys[0]) is first  # reused, and now the most recent
    for key in keys[MAX_SHAPES:]:
        decoder._shape(key)
    kept = list(decoder._shapes)
    assert len(kept) == MAX_SHAPES and keys[0] in kept and keys[1] not in kept
    assert kept[-1] == keys[-1] and first.cache.layers[0].keys.shape[0] == 1
