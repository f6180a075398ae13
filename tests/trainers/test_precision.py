"""Rounding the learner's float32 weights to bf16 at the start of a bf16 run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from synthetic import two_seat_episodes

from trainers import precision
from trainers.config import LearnerConfig
from trainers.learner import Learner
from trainers.precision import autocast_dtype, has_bfloat16_copy, snap_to_bfloat16

TIE = 1.0 + 2.0**-8
"""Exactly halfway between the bf16 values 1.0 and 1.0078125 (a float16 value, not a bf16 one)."""


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float32)


def test_a_tie_jumps_a_whole_bf16_step_under_any_change_until_snapped() -> None:
    tie = torch.tensor([TIE])
    assert bf16(tie).item() == 1.0  # ties to even
    assert bf16(tie + 1e-6).item() == 1.0078125  # a change of 1e-6 moves the copy by 2^-7
    assert bf16(tie - 1e-6).item() == 1.0
    odd_tie = torch.tensor([1.0078125 + 2.0**-8])  # ties to even go up here, so down jumps
    assert bf16(odd_tie).item() == 1.015625
    assert bf16(odd_tie - 1e-6).item() == 1.0078125

    model = torch.nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[TIE], [0.5]]))
    assert snap_to_bfloat16(model) == 1  # 0.5 is a bf16 value already
    assert model.weight[:, 0].tolist() == [1.0, 0.5]
    assert bf16(model.weight + 1e-6)[:, 0].tolist() == [1.0, 0.5]  # small changes now vanish
    assert bf16(model.weight + 2.0**-8 + 1e-6)[0, 0].item() == 1.0078125  # past half a step


def test_autocast_dtype_resolves_only_auto() -> None:
    cpu = torch.device("cpu")
    assert autocast_dtype(None, cpu) is None
    assert autocast_dtype("bfloat16", cpu) == "bfloat16"
    assert autocast_dtype("auto", cpu) in ("bfloat16", None)


def tiny(directory: Path, autocast: str | None, sampled_in: str | None = None) -> LearnerConfig:
    return LearnerConfig.from_dict(
        {
            "model": "tiny",
            "autocast": autocast,
            "sampled_in": sampled_in,
            "optim": {"lr": 1e-3},
            "batch": {"micro_batch_tokens": 128, "max_seq_len": 64},
            "checkpoint": {"dir": str(directory), "every": 1},
        }
    )


def representable(model: torch.nn.Module) -> bool:
    return all(torch.equal(bf16(p), p) for p in model.parameters())


def test_a_bf16_learner_snaps_its_weights_once_and_a_float32_one_never(tmp_path: Path) -> None:
    with torch.no_grad():
        plain = Learner(tiny(tmp_path / "f32", None))
        assert not representable(plain.model)  # the tiny model starts in generic float32
    learner = Learner(tiny(tmp_path / "bf16", "bfloat16"))
    assert representable(learner.model)
    learner.add_episodes(two_seat_episodes(3))
    learner.step()  # checkpointed: float32 weights with updates below bf16's step
    assert not representable(learner.model)
    resumed = Learner(tiny(tmp_path / "bf16", "bfloat16"))
    assert resumed.state.step == 1
    for a, b in zip(learner.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)  # a resume is not rounded again: sub-step progress is kept


def test_a_float32_learner_beside_a_bf16_service_snaps_too(tmp_path: Path) -> None:
    """The service's bf16 copy of float32 weights has the ties as much as autocast's has."""
    with torch.no_grad():
        assert representable(Learner(tiny(tmp_path / "a", None, "bfloat16")).model)
        assert not representable(Learner(tiny(tmp_path / "b", None, "float32")).model)


def test_has_bfloat16_copy() -> None:
    cpu = torch.device("cpu")
    assert has_bfloat16_copy("bfloat16", None, cpu)
    assert has_bfloat16_copy(None, "bfloat16", cpu)
    assert not has_bfloat16_copy(None, "float32", cpu)
    assert not has_bfloat16_copy(None, None, cpu)


@pytest.mark.parametrize("fast", ["bfloat16", "float32"])
def test_a_service_in_dtype_auto_is_resolved_on_the_learners_device(
    fast: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sampled_in: auto`` (the inference actors run elsewhere, on hosts of the learner's
    kind) means what ``auto`` means on the learner's own device."""
    asked: list[str] = []
    monkeypatch.setattr(precision, "fast_dtype", lambda device: asked.append(device) or fast)
    assert has_bfloat16_copy(None, "auto", torch.device("cpu")) == (fast == "bfloat16")
    assert asked == ["cpu"]


def test_sampled_in_is_checked() -> None:
    with pytest.raises(ValueError, match="sampled_in = 'bf16'; expected null, float32"):
        LearnerConfig(sampled_in="bf16")
