"""Named policies in one learner: an adapter each on the frozen base, trained in one step.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_adapters.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from synthetic import make_config, two_seat_episodes

from arena.models.lora import read_adapter
from arena.records import Episode
from trainers.learner import Learner

BASE_PARAMS = ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight")


def played_by(episodes: list[Episode], adapters: dict[str, str | None]) -> list[Episode]:
    """The episodes with seat p0 played by ``adapters['p0']``, p1 by ``adapters['p1']``."""
    for ep in episodes:
        for seat, assignment in ep.seats.items():
            assignment.adapter = adapters[seat]
    return episodes


def learner(tmp_path: Path | None = None, **extra: dict) -> Learner:
    sections = {
        "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
        "advantage": {"mode": "batch", "key": ["game", "agent"]},
        **extra,
    }
    config = make_config(**sections)
    config.adapters = {"first": "", "second": ""}
    if tmp_path is not None:
        config.checkpoint.dir = str(tmp_path)
        config.checkpoint.every = 1
    return Learner(config)


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def changed(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], part: str) -> bool:
    return any(not torch.equal(before[k], after[k]) for k in before if part in k)


def test_a_step_moves_only_the_adapters_that_played(tmp_path: Path) -> None:
    trainer = learner()
    model = trainer.model
    assert not any(p.requires_grad for n, p in model.named_parameters() if ".lora_" not in n)
    before = snapshot(model)
    trainer.add_episodes(played_by(two_seat_episodes(4), {"p0": "first", "p1": "first"}))
    metrics = trainer.step()
    after = snapshot(model)
    assert changed(before, after, ".lora_B.first") and not changed(before, after, ".second")
    assert all(torch.equal(before[k], after[k]) for k in BASE_PARAMS)
    assert metrics["policy/first/turns"] == 16 and metrics["policy/second/turns"] == 0
    assert metrics["grad_norm/first"] > 0 and metrics["grad_norm/second"] == 0


def test_both_adapters_train_in_one_step_each_on_its_own_turns() -> None:
    """One step over seats played by two adapters moves each by the turns of its seat only: it
    equals a learner that trains the first adapter alone on the same episodes (the other
    seat's turns left out). The batch's size scales the loss (a mean over turns), so AdamW's
    eps is made negligible: its first step is then lr * sign(gradient), which any leak of the
    other seat's turns into this adapter's gradient would change."""
    episodes = two_seat_episodes(4)
    constant = {"optim": {"lr": 1e-3, "eps": 1e-30}}
    both = learner(**constant)
    both.add_episodes(played_by(episodes, {"p0": "first", "p1": "second"}))
    metrics = both.step()
    assert metrics["policy/first/turns"] == 8 and metrics["policy/second/turns"] == 8
    assert metrics["grad_norm/first"] > 0 and metrics["grad_norm/second"] > 0
    # the same turns of p0 alone (p1's left out as played by an adapter it does not train)
    alone = learner(**constant)
    alone.adapters.names.remove("second")
    alone.add_episodes(played_by(two_seat_episodes(4), {"p0": "first", "p1": "second"}))
    alone_metrics = alone.step()
    assert alone_metrics["policy/first/turns"] == 8
    assert alone.state.counters["rejected_adapter"] == 8
    # advantages are per (game, agent), so p0's are the same in both runs: so is its adapter
    a = {k: v for k, v in both.model.state_dict().items() if ".first" in k}
    b = {k: v for k, v in alone.model.state_dict().items() if ".first" in k}
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)


def test_turns_of_the_base_or_an_unknown_adapter_are_left_out_and_counted() -> None:
    trainer = learner()
    trainer.add_episodes(played_by(two_seat_episodes(2), {"p0": "judge", "p1": None}))
    metrics = trainer.step()
    assert trainer.state.counters["rejected_adapter"] == 8
    assert metrics["samples"] == 0


def test_weight_updates_carry_the_adapters_alone() -> None:
    """One buffer per adapter, every layer's pair a view of it: 2 layers x (q: 64 -> 64 and
    v: 64 -> 32 in the tiny model) x r 4 = 4 * (128 + 96) * 2 = 1792 elements an adapter."""
    trainer = learner()
    exported = trainer.export_weights()
    assert sorted(exported) == ["lora_adapter.first", "lora_adapter.second"]
    assert [t.numel() for t in exported.values()] == [1792, 1792]
    with torch.no_grad():  # the buffer is the adapter: a change to a pair shows in it
        trainer.adapters.parameters("first")[1].add_(1.0)
    assert float(trainer.export_weights()["lora_adapter.first"].sum()) != float(
        exported["lora_adapter.first"].sum()
    )


def test_checkpoints_hold_each_adapter_and_a_resume_restores_them(tmp_path: Path) -> None:
    trainer = learner(tmp_path)
    trainer.add_episodes(played_by(two_seat_episodes(3), {"p0": "first", "p1": "second"}))
    trainer.step()
    checkpoint = tmp_path / "step-00000001"
    for name in ("first", "second"):
        shape, state = read_adapter(checkpoint / "adapters" / name, base="tiny")
        assert shape.r == 4 and state
    with pytest.raises(ValueError, match="made for base model 'tiny'"):
        read_adapter(checkpoint / "adapters" / "first", base="smollm2-135m")
    want = {k: v for k, v in trainer.model.state_dict().items() if ".lora_" in k}
    resumed = learner(tmp_path)
    assert resumed.state.step == 1
    got = {k: v for k, v in resumed.model.state_dict().items() if ".lora_" in k}
    assert want.keys() == got.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0)
    # the optimizer state came back too: one more step from each gives the same weights
    for each in (trainer, resumed):
        each.add_episodes(
            played_by(two_seat_episodes(2, start=50), {"p0": "first", "p1": "second"})
        )
        each.step()
    for key in want:
        torch.testing.assert_close(
            resumed.model.state_dict()[key], trainer.model.state_dict()[key], rtol=0, atol=1e-7
        )


def test_lora_and_named_policies_exclude_each_other() -> None:
    config = make_config(lora={"enabled": True})
    config.adapters = {"first": ""}
    with pytest.raises(ValueError, match="use one or the other"):
        Learner(config)
