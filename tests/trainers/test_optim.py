"""The learning-rate schedule (:func:`trainers.optim.learning_rate`), against values worked out
by hand. Run with ``.venv/bin/python -m pytest -q tests/trainers/test_optim.py``."""

from __future__ import annotations

import pytest

from trainers.config import OptimConfig
from trainers.optim import learning_rate


def test_warmup_then_decay_by_hand() -> None:
    # warmup 2: lr/2, lr; then 8 steps of decay (total 10)
    cosine = OptimConfig(lr=1.0, warmup_steps=2, schedule="cosine", total_steps=10)
    assert [learning_rate(s, cosine) for s in (0, 1)] == [0.5, 1.0]
    assert learning_rate(2, cosine) == pytest.approx(1.0)
    assert learning_rate(6, cosine) == pytest.approx(0.5)  # half way: (1 + cos(pi/2)) / 2
    assert learning_rate(10, cosine) == pytest.approx(0.0)
    assert learning_rate(50, cosine) == pytest.approx(0.0)  # held at the floor after the end
    linear = OptimConfig(lr=2.0, schedule="linear", total_steps=4, min_lr_ratio=0.5)
    # 2 * (0.5 + 0.5 * (1 - s/4)): 2, 1.75, 1.5, 1.25, 1
    assert [learning_rate(s, linear) for s in range(5)] == pytest.approx([2, 1.75, 1.5, 1.25, 1])


def test_the_decay_starts_where_the_warmup_ends() -> None:
    # lr 1, warmup 2, linear to 0.1 at step 10: progress = (step - 2) / (10 - 2).
    #   step 6: progress 0.5 -> 0.1 + 0.9 * 0.5 = 0.55 (measured from step 0 it would be
    #   0.1 + 0.9 * (1 - 0.6) = 0.46); step 2: progress 0 -> 1.0; step 8: 0.1 + 0.9 * 0.25 = 0.325
    linear = OptimConfig(
        lr=1.0, warmup_steps=2, schedule="linear", total_steps=10, min_lr_ratio=0.1
    )
    got = [learning_rate(s, linear) for s in (0, 1, 2, 6, 8, 10, 11)]
    assert got == pytest.approx([0.5, 1.0, 1.0, 0.55, 0.325, 0.1, 0.1], abs=1e-12)


def test_a_decay_without_a_length_is_refused_and_constant_needs_none() -> None:
    assert learning_rate(7, OptimConfig(lr=0.1)) == 0.1
    with pytest.raises(ValueError, match="optim.total_steps"):
        learning_rate(0, OptimConfig(lr=0.1, schedule="linear"))


def test_the_schedule_is_described_in_a_few_words() -> None:
    assert OptimConfig(lr=2e-5).describe() == "2e-05"
    cosine = OptimConfig(lr=2e-5, schedule="cosine", total_steps=24, min_lr_ratio=0.1)
    assert cosine.describe() == "2e-05 (cosine to 2e-06 over 24 steps)"
    warm = OptimConfig(lr=1e-5, warmup_steps=3)
    assert warm.describe() == "1e-05 (3 warm-up steps)"
    unsized = OptimConfig(lr=2e-5, schedule="linear")
    assert unsized.describe() == "2e-05 (linear to 0 over total_steps (unset))"
