"""Staleness metrics of a learner step: the learner's version minus each turn's policy_version,
as ``staleness_mean``, ``staleness_p50`` and ``staleness_max``.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_staleness_metrics.py``.
"""

from __future__ import annotations

import pytest
from synthetic import two_seat_episodes

from trainers.config import LearnerConfig
from trainers.filters import staleness_metrics
from trainers.learner import Learner


def make_config(**batch: object) -> LearnerConfig:
    return LearnerConfig.from_dict(
        {
            "optim": {"lr": 1e-3},
            "batch": {
                "micro_batch_tokens": 256,
                "max_seq_len": 64,
                "filter_zero_advantage": False,
                **batch,
            },
        }
    )


def test_hand_computed_versions() -> None:
    # learner at version 5; turns from versions 5, 5, 4, 2, 1 -> lags 0, 0, 1, 3, 4
    out = staleness_metrics([5, 5, 4, 2, 1], 5)
    assert out == {"staleness_mean": 1.6, "staleness_p50": 1.0, "staleness_max": 4.0}
    # an even count: the median is the mean of the middle two (lags 0, 1, 2, 3)
    assert staleness_metrics([3, 2, 1, 0], 3)["staleness_p50"] == 1.5
    assert staleness_metrics([7], 7) == {
        "staleness_mean": 0.0,
        "staleness_p50": 0.0,
        "staleness_max": 0.0,
    }
    assert staleness_metrics([], 3) == {}


def test_a_fresh_batch_is_zero_versions_old(fresh_tiny) -> None:
    learner = Learner(make_config(), *fresh_tiny)
    learner.add_episodes(two_seat_episodes(2))  # 8 turns at version 0, learner at 0
    metrics = learner.step()
    assert metrics["staleness_mean"] == 0.0
    assert metrics["staleness_p50"] == 0.0
    assert metrics["staleness_max"] == 0.0


def test_step_reports_the_lag_of_every_turn_it_took(fresh_tiny) -> None:
    learner = Learner(make_config(max_staleness=4), *fresh_tiny)
    for start in (0, 10):  # two steps: the learner is at version 2
        learner.add_episodes(two_seat_episodes(1, start=start))
        learner.step()
    assert learner.version == 2
    # 4 turns each from versions 0, 1 and 2, then 8 more from version 2: lags 2x4, 1x4, 0x12
    learner.add_episodes(
        two_seat_episodes(1, start=20, version=0)
        + two_seat_episodes(1, start=30, version=1)
        + two_seat_episodes(3, start=40, version=2)
    )
    metrics = learner.step()
    assert metrics["turns"] == 20
    assert metrics["staleness_mean"] == pytest.approx((2 * 4 + 1 * 4) / 20)
    assert metrics["staleness_p50"] == 0.0
    assert metrics["staleness_max"] == 2.0
    assert metrics["version_before"] == 2.0 and metrics["version"] == 3.0


def test_turns_the_bound_rejects_still_count(fresh_tiny) -> None:
    learner = Learner(make_config(max_staleness=0), *fresh_tiny)
    learner.add_episodes(two_seat_episodes(1))
    learner.step()  # version 1
    learner.add_episodes(
        two_seat_episodes(1, start=10, version=0) + two_seat_episodes(1, start=20, version=1)
    )
    metrics = learner.step()
    assert metrics["filtered/stale_rejected"] == 4 and metrics["samples"] == 4
    assert metrics["staleness_p50"] == 0.5 and metrics["staleness_max"] == 1.0
    assert metrics["staleness_mean"] == 0.5
