"""Several optimizer steps per batch: mini-batches and epochs against one old policy.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_update.py``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import synthetic
import torch
from synthetic import episode, params, turn, two_seat_episodes

from arena.models import tiny_model
from trainers.batch import Sample
from trainers.config import LearnerConfig
from trainers.learner import Learner
from trainers.logprobs import TokenLogprobs
from trainers.microbatch import collate
from trainers.optim import build_optimizer

# 64-token micro-batches: a mini-batch here spans several, so accumulation is exercised
make_config = functools.partial(synthetic.make_config, 64)


def adam_steps(learner: Learner) -> set[int]:
    """The step counters AdamW keeps per parameter (one increment per optimizer step)."""
    return {int(state["step"]) for state in learner.optimizer.state.values()}


def capture_kept(learner: Learner, silent: list[Sample] | None = None) -> list[Sample]:
    """Record the turns each update trains on (advantages assigned, filters applied), and in
    ``silent`` those the zero-advantage filter left out."""
    kept: list[Sample] = []
    update = learner._update

    def recording(samples: list[Sample], left_out: list[Sample]) -> dict[str, float]:
        kept.extend(samples)
        if silent is not None:
            silent.extend(left_out)
        return update(samples, left_out)

    learner._update = recording  # type: ignore[method-assign]
    return kept


def test_two_minibatches_take_two_steps_against_the_old_policy(fresh_tiny) -> None:
    learner = Learner(make_config(loss={"minibatches": 2}), *fresh_tiny)
    kept = capture_kept(learner)
    learner.add_episodes(two_seat_episodes(6))
    metrics = learner.step()
    assert metrics["optimizer_steps"] == 2.0 and adam_steps(learner) == {2}
    assert learner.state.step == 1 and metrics["version"] == 1.0  # one batch, one version
    assert learner.state.samples_trained == len(kept) == metrics["samples"]
    # Mini-batch 0 trains at ratio 1; mini-batch 1 is scored against the policy from before
    # the first step, which has moved: its ratios leave 1 (they would not if its old logprobs
    # came from its own first pass, after the first step).
    assert metrics["ratio_dev"] > 1e-5
    for name in ("clip_frac", "dual_clip_frac", "ratio_dev", "entropy", "grad_norm", "loss"):
        assert torch.isfinite(torch.tensor(metrics[name])), name


def test_the_split_is_a_seeded_partition_kept_whole_turns(fresh_tiny) -> None:
    learner = Learner(make_config(loss={"minibatches": 3}), *fresh_tiny)
    parts = learner.update.split(10, step=0)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert sorted(i for p in parts for i in p) == list(range(10))
    again = [list(p) for p in learner.update.split(10, step=0)]
    assert again == [list(p) for p in parts]  # the same on every rank and after a resume
    assert [list(p) for p in learner.update.split(10, step=1)] != again  # reshuffled next step
    assert len(learner.update.split(2, step=0)) == 2  # never more mini-batches than turns


def test_without_a_step_between_the_ratio_stays_one(fresh_tiny) -> None:
    # lr 0: no weight moves, so the no-grad old logprobs of mini-batch 1 must equal those of
    # its training pass (same forward, with or without a graph).
    learner = Learner(make_config(loss={"minibatches": 2}, optim={"lr": 0.0}), *fresh_tiny)
    learner.add_episodes(two_seat_episodes(6))
    metrics = learner.step()
    assert metrics["optimizer_steps"] == 2.0
    assert metrics["ratio_dev"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["clip_frac"] == 0.0


def test_a_large_learning_rate_gets_clipped(fresh_tiny) -> None:
    config = make_config(loss={"minibatches": 2, "ppo_epochs": 2}, optim={"lr": 0.05})
    learner = Learner(config, *fresh_tiny)
    learner.add_episodes(two_seat_episodes(8))
    metrics = learner.step()
    assert metrics["optimizer_steps"] == 4.0 and adam_steps(learner) == {4}
    assert metrics["clip_frac"] > 0.0 and metrics["ratio_dev"] > 0.05
    assert metrics["dual_clip_frac"] > 0.0  # negative advantages with ratios past 3


def test_one_step_is_reinforce_with_truncated_is(fresh_tiny) -> None:
    """minibatches = ppo_epochs = 1 is the update of old: r = 1, so no clip acts, and the step
    is AdamW on -sum_t a_t min(pi / pi_sampler, C) A logp_t, computed here by hand (a_t = 1 /
    the tokens of every turn with a finite advantage, the zero-advantage ones included)."""
    config = make_config(loss={"minibatches": 1, "ppo_epochs": 1})
    learner = Learner(config, *fresh_tiny)
    silent: list[Sample] = []
    kept = capture_kept(learner, silent)
    learner.add_episodes(two_seat_episodes(6))
    metrics = learner.step()
    assert metrics["optimizer_steps"] == 1.0 and metrics["clip_frac"] == 0.0
    assert metrics["ratio_dev"] == 0.0 and adam_steps(learner) == {1}

    model, tokenizer = tiny_model(seed=0)
    model.train()
    mb = collate(kept, int(tokenizer.pad_token_id))
    logp, _ = TokenLogprobs(model)(*mb.forward_args())
    tis = torch.clamp(torch.exp(logp.detach() - mb.sampler_logprobs), max=config.loss.tis_cap)
    tokens = logp.numel() + sum(len(s.response_ids) for s in silent)
    assert silent and metrics["signal_share"] == pytest.approx(logp.numel() / tokens)
    loss = -(tis * mb.advantages * logp).sum() / tokens
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), config.optim.grad_clip)
    build_optimizer(model, config.optim, torch.device("cpu")).step()
    expected = float(-(tis * mb.advantages).sum() / tokens)
    assert metrics["loss"] == pytest.approx(expected, rel=1e-5)
    # AdamW's first step moves each weight by about lr; where a gradient is near eps, float
    # order (micro-batches vs one batch) shifts that by a little: 1e-3 of lr is the tolerance.
    trained = params(learner.model)
    for name, expected in params(model).items():
        assert torch.allclose(trained[name], expected, rtol=0, atol=1e-6), name


def checkpointed(directory: Path) -> LearnerConfig:
    return make_config(
        loss={"minibatches": 2, "ppo_epochs": 2},
        optim={"warmup_steps": 2, "schedule": "cosine", "total_steps": 10},
        checkpoint={"dir": str(directory), "every": 2},
    )


def test_resume_with_minibatches_is_exact(tmp_path: Path) -> None:
    straight = Learner(checkpointed(tmp_path / "a"))
    for i in range(3):
        straight.add_episodes(two_seat_episodes(4, start=10 * i))
        straight.step()
    crashed = Learner(checkpointed(tmp_path / "b"))
    for i in range(3):  # step 3 is lost: only step 2 was saved
        crashed.add_episodes(two_seat_episodes(4, start=10 * i))
        crashed.step()
    resumed = Learner(checkpointed(tmp_path / "b"))
    assert resumed.state.step == 2 and adam_steps(resumed) == {8}
    resumed.add_episodes(two_seat_episodes(4, start=20))
    metrics = resumed.step()
    assert metrics["optimizer_steps"] == 4.0 and adam_steps(resumed) == {12}
    expected = params(straight.model)
    for name, tensor in params(resumed.model).items():
        assert torch.equal(tensor, expected[name]), name


def grouped_episodes() -> list:
    """Group ``a``: two attempts with equal returns (advantage 0 in group mode); group ``b``:
    a win and a loss. Two turns of 2 response tokens each per episode."""
    out = []
    for name, group, reward in (
        ("a0", "a", 1.0),
        ("a1", "a", 1.0),
        ("b0", "b", 1.0),
        ("b1", "b", -1.0),
    ):
        turns = [
            turn(name, i, "p0", group=group, prompt=(1, 2, 3 + i), reward=reward * i)
            for i in range(2)
        ]
        out.append(episode(name, turns, final_rewards={"p0": reward}))
    return out


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "constant"])
def test_the_zero_advantage_filter_saves_compute_and_changes_no_update(aggregation: str) -> None:
    # The turns of group a carry no signal. Dropping them from the passes must give the loss
    # and the gradient of training on all turns: they stay in the normalizer. (Normalizing over
    # the kept turns alone doubled this batch's gradient, and a batch with 4 of 64 informative
    # turns took a full-size step on those 4.)
    results = {}
    for filtered in (True, False):
        model, tokenizer = tiny_model(seed=0)
        config = make_config(
            advantage={"mode": "group"},
            batch={"filter_zero_advantage": filtered, "max_response_tokens": 8},
            loss={"aggregation": aggregation},
        )
        learner = Learner(config, model, tokenizer)
        learner.add_episodes(grouped_episodes())
        results[filtered] = learner.step()
    kept, full = results[True], results[False]
    assert kept["samples"] == 4 and full["samples"] == 8
    assert kept["filtered/zero_advantage"] == 4
    assert kept["signal_share"] == pytest.approx(0.5) and full["signal_share"] == 1.0
    assert kept["loss"] == pytest.approx(full["loss"], abs=1e-6)
    # (rows differ: turns that share a prompt share a row, so float32 sums round differently;
    # the gradient here nearly cancels, to 7.6e-9, which makes its rounding relatively large)
    assert kept["grad_norm"] == pytest.approx(full["grad_norm"], rel=2e-3)
