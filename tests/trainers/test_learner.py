"""The in-process learner: input hygiene, one update, accumulation, NaN guard, LoRA, weights.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_learner.py``.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace

import numpy as np
import pytest
import torch
from synthetic import bandit_episode, episode, make_config, params, two_seat_episodes

import trainers.update as update_module
from arena.core.errors import ConfigError
from arena.records import synthetic_turn
from arena.weights.assembler import WeightAssembler
from trainers.config import LearnerConfig
from trainers.learner import Learner


def on(device: str, config: LearnerConfig) -> LearnerConfig:
    """``config`` with the learner on ``device`` (the ``device`` fixture: cpu, and cuda where
    there is one; the learner's own default, ``auto``, would pick CUDA on a GPU host)."""
    return replace(config, device=device)


def test_bad_episodes_are_rejected_and_the_batch_goes_on(fresh_tiny, caplog) -> None:
    learner = Learner(make_config(), *fresh_tiny)
    good = [e.to_dict() for e in two_seat_episodes(3)]
    missing = copy.deepcopy(good[0]) | {"id": "missing"}
    del missing["turns"][1]["reward"]
    wrong_dtype = copy.deepcopy(good[1]) | {"id": "dtype"}
    wrong_dtype["turns"][0]["prompt_ids"] = np.array([1.5, 2.5])
    mismatched = copy.deepcopy(good[2]) | {"id": "lengths"}
    mismatched["turns"][2]["response_logprobs"] = np.zeros(9, dtype=np.float32)
    for bad in (missing, wrong_dtype, mismatched):  # renamed copies: their turns follow
        for t in bad["turns"]:
            t["episode_id"] = bad["id"]
    not_a_map = "garbage"
    accepted = learner.add_episodes(
        [good[0], missing, wrong_dtype, not_a_map, mismatched, good[1], good[2]]
    )
    assert accepted == 3
    assert learner.state.counters["rejected_bad_record"] == 4
    reasons = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert (
        "missing field 'reward'" in reasons
        and "dtype" in reasons
        and "response_logprobs" in reasons
    )
    # Duplicates are dropped by id.
    assert learner.add_episodes([good[0]]) == 0
    assert learner.state.counters["rejected_duplicate"] == 1
    metrics = learner.step()
    assert metrics is not None and metrics["samples"] > 0 and metrics["version"] == 1.0
    assert learner.step() is None  # nothing pending


def test_one_step_moves_weights_and_reports_metrics(fresh_tiny, device: str) -> None:
    learner = Learner(on(device, make_config()), *fresh_tiny)
    assert learner.device.type == device
    before = params(learner.model)
    learner.add_episodes(two_seat_episodes(6))
    metrics = learner.step()
    after = params(learner.model)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    for name in (
        "loss",
        "pg_loss",
        "entropy",
        "clip_frac",
        "grad_norm",
        "tokens_per_s",
        "lr",
        "adv/g/p0/mean",
        "adv/g/p1/std",
        "return/g/p0/mean",
        "sampler_kl",
    ):
        assert name in metrics and np.isfinite(metrics[name]), name
    # per advantage key (game, agent): each seat's advantages are centred on its own mean
    for seat in ("p0", "p1"):
        assert metrics[f"adv/g/{seat}/mean"] == pytest.approx(0.0, abs=1e-6)
    assert not any(k.startswith("adv/g/player/") for k in metrics)
    assert learner.state.step == 1 and learner.version == 1


def test_gradient_accumulation_equals_one_big_batch() -> None:
    from arena.models import tiny_model

    results = []
    for budget in (512, 24):  # one micro-batch vs many
        model, tokenizer = tiny_model(seed=0)
        config = make_config(
            batch={"micro_batch_tokens": budget, "max_seq_len": 24},
            loss={"aggregation": "seq-mean-token-mean"},
        )
        learner = Learner(config, model, tokenizer)
        learner.add_episodes(two_seat_episodes(4))
        metrics = learner.step()
        results.append((params(learner.model), metrics))
    (big, m_big), (small, m_small) = results
    for name in big:
        assert torch.allclose(big[name], small[name], atol=1e-6), name
    assert m_small["loss"] == pytest.approx(m_big["loss"], abs=1e-6)
    assert m_small["grad_norm"] == pytest.approx(m_big["grad_norm"], rel=1e-4)


def test_nan_loss_skips_the_step_without_touching_weights(fresh_tiny, monkeypatch, caplog) -> None:
    learner = Learner(make_config(), *fresh_tiny)
    real_loss = update_module.policy_loss
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        out = real_loss(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 1:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(update_module, "policy_loss", poisoned)
    before = params(learner.model)
    learner.add_episodes(two_seat_episodes(4))
    metrics = learner.step()
    assert metrics["skipped"] == 1.0 and "version" not in metrics
    assert learner.state.counters["skipped_nonfinite"] == 1 and learner.state.step == 0
    after = params(learner.model)
    assert all(torch.equal(before[n], after[n]) for n in before)
    assert all(not p.isnan().any() for p in after.values())
    assert any("non-finite" in r.getMessage() for r in caplog.records)
    # Nothing lingers: the next step trains normally.
    learner.add_episodes(two_seat_episodes(4, start=100))
    metrics = learner.step()
    assert metrics["version"] == 1.0 and np.isfinite(metrics["loss"])
    assert any(not torch.equal(before[n], p) for n, p in params(learner.model).items())


def test_stale_turns_are_rejected(fresh_tiny) -> None:
    # Zero-advantage turns kept: with per-seat keys a seat whose two fresh episodes end alike
    # has advantage 0, and this test counts the staleness filter alone.
    config = make_config(batch={"max_staleness": 0, "filter_zero_advantage": False})
    learner = Learner(config, *fresh_tiny)
    learner.add_episodes(two_seat_episodes(2))
    learner.step()  # now at version 1
    learner.add_episodes(
        two_seat_episodes(2, start=10, version=0) + two_seat_episodes(2, start=20, version=1)
    )
    metrics = learner.step()
    assert metrics["filtered/stale_rejected"] == 8 and metrics["samples"] == 8


def test_ppo_epochs_kl_and_entropy_terms(fresh_tiny) -> None:
    config = make_config(loss={"ppo_epochs": 2, "kl_coef": 0.1, "entropy_coef": 0.01})
    learner = Learner(config, *fresh_tiny)
    learner.add_episodes(two_seat_episodes(4))
    metrics = learner.step()
    # The second epoch sees the first update: ratios move off 1 and the policy off the reference.
    assert metrics["ratio"] != pytest.approx(1.0, abs=1e-7)
    assert metrics["kl_token"] > 0.0
    assert learner.reference is not None
    assert not any(p.requires_grad for p in learner.reference.parameters())


def test_lora_trains_adapters_only_and_exports_merged_hf_weights(fresh_tiny, device: str) -> None:
    model, tokenizer = fresh_tiny
    base_before = {n: p.detach().clone() for n, p in model.named_parameters()}  # on the CPU
    config = make_config(
        lora={"enabled": True, "r": 4, "alpha": 8}, loss={"kl_coef": 0.05}, optim={"lr": 1e-2}
    )
    config = on(device, config)
    learner = Learner(config, model, tokenizer)
    learner.add_episodes(two_seat_episodes(4))
    metrics = learner.step()
    assert metrics["kl_token"] == pytest.approx(0.0, abs=1e-9)  # adapters start at B = 0
    learner.add_episodes(two_seat_episodes(4, start=50))
    learner.step()
    exported = learner.export_weights()
    assert set(exported) == set(base_before) | {"lm_head.weight"}
    assert not any("lora" in n for n in exported)
    frozen = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p
        for n, p in learner.model.named_parameters()
        if "lora_" not in n
    }
    assert all(frozen[n].device.type == device for n in base_before)
    assert all(torch.equal(frozen[n].cpu(), base_before[n]) for n in base_before)
    assert all(t.device.type == "cpu" for t in exported.values())  # export_weights: CPU copies
    changed = [n for n in base_before if not torch.equal(exported[n], base_before[n])]
    assert changed and all("proj" in n for n in changed)  # only adapted layers moved


def test_weight_buckets_assemble_to_the_exported_state(fresh_tiny, device: str) -> None:
    model, tokenizer = fresh_tiny
    learner = Learner(on(device, make_config()), model, tokenizer)
    learner.add_episodes(two_seat_episodes(2))
    learner.step()
    assembler = WeightAssembler(model.state_dict())
    result = None
    for body in learner.weight_buckets(bucket_bytes=1 << 20):
        result = assembler.add(body) or result
    assert result is not None
    version, state = result
    assert version == 1
    for name, tensor in model.state_dict().items():  # the model on `device`, the update on the CPU
        assert tensor.device.type == device and state[name].device.type == "cpu"
        assert torch.equal(state[name], tensor.cpu()), name


def test_autocast_and_gradient_checkpointing(fresh_tiny, device: str) -> None:
    config = LearnerConfig.from_dict(
        {
            **make_config().to_dict(),
            "autocast": "bfloat16",
            "gradient_checkpointing": True,
            "device": device,
        }
    )
    learner = Learner(config, *fresh_tiny)
    before = params(learner.model)
    learner.add_episodes(two_seat_episodes(3))
    metrics = learner.step()
    assert metrics["version"] == 1.0 and np.isfinite(metrics["loss"])
    after = params(learner.model)
    assert all(t.dtype == torch.float32 for t in after.values())  # weights stay in fp32
    assert any(not torch.equal(before[n], after[n]) for n in before)


def test_a_batch_without_signal_still_counts_as_a_step(fresh_tiny) -> None:
    learner = Learner(make_config(batch={"max_response_tokens": 1}), *fresh_tiny)
    before = params(learner.model)
    learner.add_episodes(two_seat_episodes(2))  # every response reached the limit: all overlong
    metrics = learner.step()
    assert metrics["no_signal"] == 1.0 and metrics["samples"] == 0
    assert metrics["step"] == metrics["version"] == 1 and learner.version == 1
    assert all(torch.equal(before[n], p) for n, p in params(learner.model).items())


def test_the_loss_of_one_step_by_hand(fresh_tiny) -> None:
    """The loss of trainers/losses.py end to end, where one optimizer step makes the ratio 1
    and ``tis_cap: null`` makes w 1: L_t = -A per loss element, token-mean over every element,
    the zero-advantage turns' included (docs/training.md, "The loss").

    ema, alpha 0.95, one key, one-token bandit turns in id order with R = 0, 1, 0, 1:
      e0: A = 0 - 0 = 0 (left out of the pass, counted), b = 0; e1: A = 1, b = 0.05;
      e2: A = -0.05, b = 0.0475; e3: A = 1 - 0.0475 = 0.9525.
      loss = -(0 + 1 - 0.05 + 0.9525) / 4 = -0.475625 (over the 3 kept turns: -0.634167).
    A generated turn of 2 tokens (R = 1, A = 1) and a choice turn (R = -1, A = -1 - 0.05 = -1.05,
    one element) in token-mean: -(2 * 1 - 1.05) / 3 = -0.316667; in seq-mean-token-mean, per
    turn then over turns: -(1 - 1.05) / 2 = 0.025.
    """
    config = make_config(advantage={"mode": "ema"}, loss={"tis_cap": None})
    learner = Learner(config, *fresh_tiny)
    rewards = [0.0, 1.0, 0.0, 1.0]
    learner.add_episodes(
        [bandit_episode(f"e{i}", [5, 6], 7, -1.0, r) for i, r in enumerate(rewards)]
    )
    metrics = learner.step()
    assert metrics is not None and metrics["optimizer_steps"] == 1.0
    assert metrics["pg_loss"] == pytest.approx(-0.475625, abs=1e-6)
    assert metrics["signal_share"] == 0.75 and metrics["tokens"] == 3.0
    mixed = [
        episode("e0", [synthetic_turn("e0", 0, "p0", response=[7, 8], reward=1.0)]),
        episode(
            "e1",
            [synthetic_turn("e1", 0, "p0", choices=[[7], [8, 9]], choice_index=1, reward=-1.0)],
        ),
    ]
    for aggregation, expected in (("token-mean", -0.95 / 3), ("seq-mean-token-mean", 0.025)):
        loss = {"tis_cap": None, "aggregation": aggregation}
        learner = Learner(make_config(advantage={"mode": "ema"}, loss=loss), *fresh_tiny)
        learner.add_episodes(copy.deepcopy(mixed))
        metrics = learner.step()
        assert metrics is not None and metrics["pg_loss"] == pytest.approx(expected, abs=1e-6)


def test_the_constant_aggregation_needs_its_divisor(fresh_tiny) -> None:
    # a_t = 1 / (C * N_turns) with C = loss.norm_constant, else batch.max_response_tokens
    with pytest.raises(ConfigError, match="learner.loss.norm_constant"):
        Learner(make_config(loss={"aggregation": "constant"}), *fresh_tiny)
    Learner(
        make_config(loss={"aggregation": "constant"}, batch={"max_response_tokens": 8}), *fresh_tiny
    )
