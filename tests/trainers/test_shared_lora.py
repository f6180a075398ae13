"""Run: .venv/bin/python -m pytest -q tests/trainers/test_shared_lora.py

A shared policy trained as one LoRA adapter (``learner.lora``) with ``serve: adapter``: its
weight updates carry the adapter alone, one float32 buffer in the served adapters' layout, and
an ``hf`` policy serving it as its default adapter plays exactly what the learner trained; its
checkpoints keep ``model/`` (merged) and the adapter as a peft directory beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic import make_config, two_seat_episodes
from transformers import AutoModelForCausalLM

from arena.models import tiny_model
from arena.models.adapter_shape import SHARED_ADAPTER, AdapterShape
from arena.models.lora import FLAT_PREFIX
from arena.models.lora_files import read_adapter
from arena.policies.hf import HFPolicy
from arena.policies.types import Prompt
from trainers.learner import Learner
from trainers.logprobs import unwrap_peft

KEY = f"{FLAT_PREFIX}{SHARED_ADAPTER}"
PROMPTS = [Prompt(ids=np.array([1, 5, 9, 12, 30, 40], dtype=np.int32))] * 2
REPLIES = [[np.array([7, 8, 9], dtype=np.int32)], [np.array([70, 80], dtype=np.int32)]]


def trained(tmp_path: Path) -> Learner:
    config = make_config(
        lora={"enabled": True, "r": 4, "alpha": 8, "serve": "adapter"},
        optim={"lr": 1e-2},
        checkpoint={"dir": str(tmp_path), "every": 1},
    )
    learner = Learner(config, *tiny_model(seed=0))
    learner.add_episodes(two_seat_episodes(4))
    learner.step()
    return learner


def scores(policy: HFPolicy) -> np.ndarray:
    return np.concatenate([lp for s in policy.score(PROMPTS, REPLIES) for lp in s.logprobs])


def test_an_update_carries_the_adapter_alone_and_serves_what_trained(tmp_path: Path) -> None:
    learner = trained(tmp_path)
    exported = learner.export_weights()
    assert list(exported) == [KEY] and exported[KEY].dtype == torch.float32
    shape = AdapterShape(r=4, alpha=8.0)
    policy = HFPolicy(*tiny_model(seed=0))
    (checkpoint,) = tmp_path.glob("step-*")
    _, saved = read_adapter(checkpoint / "adapters" / SHARED_ADAPTER, "tiny")
    policy.load_adapter(SHARED_ADAPTER, saved, shape=shape)
    policy.serve_by_default(SHARED_ADAPTER)
    before = scores(policy)
    policy.update_weights(exported, version=1)  # what the inference actor applies
    served = scores(policy)
    # the learner's own peft model, merged in float32: the policy it trained
    merged = HFPolicy(AutoModelForCausalLM.from_pretrained(checkpoint / "model"), policy.tokenizer)
    assert np.allclose(served, scores(merged), atol=1e-5)
    assert np.allclose(before, served, atol=1e-5)  # the checkpoint's adapter is that update
    base = HFPolicy(*tiny_model(seed=0))
    assert not np.allclose(scores(base), served, atol=1e-3)  # and the adapter plays


def test_a_checkpoint_keeps_the_merged_model_and_the_adapter(tmp_path: Path) -> None:
    learner = trained(tmp_path)
    (checkpoint,) = tmp_path.glob("step-*")
    assert (checkpoint / "adapter.safetensors").is_file()  # for resuming, as before
    shape, state = read_adapter(checkpoint / "adapters" / SHARED_ADAPTER, "tiny")
    assert shape == AdapterShape(r=4, alpha=8.0)
    peft_names = {n for n, _ in unwrap_peft(learner.model).named_parameters() if "lora_" in n}
    assert len(state) == len(peft_names)


def test_serve_must_be_merged_or_adapter() -> None:
    with pytest.raises(ValueError, match="merged or adapter"):
        Learner(make_config(lora={"enabled": True, "serve": "both"}), *tiny_model(seed=0))
