"""The HF backend serving named adapters: per-request routing in mixed batches, scoring by
adapter, loading from a peft directory, and a request for a missing adapter failing alone.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_hf_adapters.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arena.models.adapter_shape import AdapterShape
from arena.models.lora import adapter_parameters, add_adapters
from arena.models.lora_files import save_adapter
from arena.policies.hf import HFPolicy
from arena.policies.types import InvalidRequest, Prompt, SamplingParams, UnknownAdapter

SHAPE = AdapterShape(r=2, alpha=4.0, target_modules=("q_proj", "v_proj"))
GREEDY = SamplingParams(temperature=0, max_new_tokens=6)


def policy_with(tiny_model, names: list[str]) -> HFPolicy:
    model, tokenizer = tiny_model
    add_adapters(model, names, SHAPE)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name in names:
            for param in adapter_parameters(model, name):
                param.add_(torch.randn(param.shape, generator=generator) * 0.5)
    return HFPolicy(model, tokenizer, max_batch=8)


PROMPT = Prompt(ids=np.array([1, 5, 9, 12, 30, 40], dtype=np.int32))


def test_each_request_is_answered_by_its_adapter_in_one_batch(tiny_model) -> None:
    policy = policy_with(tiny_model, ["proposer", "solver"])
    assert policy.adapters() == ("proposer", "solver")
    names = ["proposer", None, "solver"]
    mixed = policy.generate(
        [PROMPT] * 3, [SamplingParams(**{**GREEDY.to_dict(), "adapter": n}) for n in names]
    )
    alone = [
        policy.generate([PROMPT], SamplingParams(**{**GREEDY.to_dict(), "adapter": n}))[0]
        for n in names
    ]
    for got, want in zip(mixed, alone, strict=True):
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
    # the adapters were made to differ: greedy replies of the three are not all one
    assert len({tuple(g.token_ids) for g in mixed}) > 1


def test_scoring_by_adapter_matches_scoring_alone(tiny_model) -> None:
    policy = policy_with(tiny_model, ["a", "b"])
    replies = [np.array([3, 4]), np.array([5])]
    mixed = policy.score([PROMPT, PROMPT, PROMPT], [replies] * 3, ["a", "b", None])
    for got, name in zip(mixed, ["a", "b", None], strict=True):
        (want,) = policy.score([PROMPT], [replies], [name])
        for g, w in zip(got.logprobs, want.logprobs, strict=True):
            np.testing.assert_allclose(g, w, atol=1e-5)
    assert not np.allclose(mixed[0].logprobs[0], mixed[1].logprobs[0], atol=1e-3)


def test_an_unknown_adapter_is_refused_before_batching(tiny_model) -> None:
    model, tokenizer = tiny_model
    bare = HFPolicy(model, tokenizer, name="main")
    with pytest.raises(
        UnknownAdapter, match="main holds no adapter named 'judge'; it serves its base model only"
    ):
        bare.prepare(PROMPT, SamplingParams(adapter="judge"))
    policy = policy_with(tiny_model, ["solver"])
    with pytest.raises(
        UnknownAdapter, match="holds no adapter named 'judge'; it holds solver"
    ) as err:
        policy.score([PROMPT], [[np.array([3])]], ["judge"])
    assert err.value.code == "unknown_adapter"
    with pytest.raises(InvalidRequest, match="adapter must be a non-empty string"):
        SamplingParams(adapter="")


def test_load_adapter_from_a_directory_replaces_or_adds(tiny_model, tmp_path) -> None:
    policy = policy_with(tiny_model, ["solver"])
    path = save_adapter(tmp_path / "solver", policy.model, "solver", base="tiny")
    want = policy.generate([PROMPT], SamplingParams(**{**GREEDY.to_dict(), "adapter": "solver"}))
    policy.load_adapter("solver-copy", str(path), base="tiny")
    got = policy.generate(
        [PROMPT], SamplingParams(**{**GREEDY.to_dict(), "adapter": "solver-copy"})
    )
    np.testing.assert_array_equal(got[0].token_ids, want[0].token_ids)
    with pytest.raises(
        ValueError, match="made for base model 'tiny', but the served base is 'other'"
    ):
        policy.load_adapter("x", str(path), base="other")
    # tensors alone (the weight-update path): zeros make the adapter the base again
    zeros = {k: torch.zeros_like(v) for k, v in policy.adapter_state("solver").items()}
    policy.load_adapter("solver", zeros)
    base = policy.generate([PROMPT], GREEDY)
    again = policy.generate([PROMPT], SamplingParams(**{**GREEDY.to_dict(), "adapter": "solver"}))
    np.testing.assert_array_equal(again[0].token_ids, base[0].token_ids)
