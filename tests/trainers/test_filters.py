"""trainers/filters.py: the staleness bound and the overlong, void and zero-advantage filters.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_filters.py``.
"""

from __future__ import annotations

from synthetic import episode, turn

from trainers.batch import episode_samples
from trainers.config import BatchConfig
from trainers.filters import apply_staleness, filter_samples


def test_staleness_reject_and_downweight() -> None:
    # Learner at version 10, bound 2: lags 0, 2 are fresh; lags 3, 5 exceed it by 1 and 3.
    samples = [
        s
        for e in [episode("e", [turn("e", i, "p", version=v) for i, v in enumerate([10, 8, 7, 5])])]
        for s in episode_samples(e, 1.0)
    ]
    kept, counts = apply_staleness(samples, 10, BatchConfig(max_staleness=2))
    assert [s.policy_version for s in kept] == [10, 8] and counts["stale_rejected"] == 2
    config = BatchConfig(max_staleness=2, stale_mode="downweight", stale_decay=0.5)
    kept, counts = apply_staleness(samples, 10, config)
    # weights: 1, 1, 0.5^1 = 0.5, 0.5^3 = 0.125
    assert [s.weight for s in kept] == [1.0, 1.0, 0.5, 0.125]
    assert counts["stale_downweighted"] == 2


def test_filters_count_each_reason() -> None:
    turns = [
        turn("e", 0, "p", response=[4, 5, 6, 7]),  # hits max_response_tokens 4
        turn("e", 1, "p", prompt=list(range(1, 30))),  # longer than max_seq_len 20
        turn("e", 2, "p", valid=False),  # void
        turn("e", 3, "p"),  # zero advantage
        turn("e", 4, "p"),  # kept
    ]
    samples = episode_samples(episode("e", turns), 1.0)
    for s, a in zip(samples, [1.0, 1.0, 1.0, 0.0, 1.0], strict=True):
        s.advantage = a
    config = BatchConfig(
        max_seq_len=20, micro_batch_tokens=64, max_response_tokens=4, filter_void=True
    )
    kept, counts, silent = filter_samples(samples, config)
    assert [s.turn_index for s in kept] == [4]
    assert counts == {"overlong": 2, "void": 1, "zero_advantage": 1}
    assert [s.turn_index for s in silent] == [3]
    # With the optional filters off, only the turn that cannot fit is dropped.
    config = BatchConfig(
        max_seq_len=20,
        micro_batch_tokens=64,
        max_response_tokens=4,
        filter_overlong=False,
        filter_zero_advantage=False,
    )
    kept, counts, silent = filter_samples(samples, config)
    assert len(kept) == 4 and counts == {"overlong": 1} and silent == []


def test_zero_advantage_means_at_most_1e_8() -> None:
    # |A| <= 1e-8 (ZERO_ADVANTAGE_TOL, EMA float dust) is zero; 2e-8 is a signal.
    samples = episode_samples(episode("z", [turn("z", k, "p") for k in range(4)]), 1.0)
    for s, a in zip(samples, [1e-8, -1e-8, 2e-8, -3e-8], strict=True):
        s.advantage = a
    kept, counts, silent = filter_samples(samples, BatchConfig())
    assert [s.turn_index for s in kept] == [2, 3] and [s.turn_index for s in silent] == [0, 1]
    assert counts == {"zero_advantage": 2}


def test_downweight_by_hand_with_the_default_decay() -> None:
    # Learner at 10, max_staleness 4, decay 0.5: a turn of version 4 is 6 old, 2 beyond the
    # bound, weight 0.5^2 = 0.25; version 6 is exactly at the bound (4 old): weight 1.
    samples = episode_samples(
        episode("w", [turn("w", i, "p", version=v) for i, v in enumerate([6, 4])]), 1.0
    )
    kept, counts = apply_staleness(samples, 10, BatchConfig(stale_mode="downweight"))
    assert [s.weight for s in kept] == [1.0, 0.25] and counts == {"stale_downweighted": 1}


def test_an_adapter_with_a_longer_limit_is_cut_off_at_its_own() -> None:
    # four-token responses: cut off at the run's limit 4, not at "long"'s own limit 8
    samples = episode_samples(
        episode("e", [turn("e", k, "p", response=[4, 5, 6, 7]) for k in range(3)]), 1.0
    )
    for s, adapter in zip(samples, [None, "long", "short"], strict=True):
        s.advantage, s.adapter = 1.0, adapter
    config = BatchConfig(
        max_seq_len=20,
        micro_batch_tokens=64,
        max_response_tokens=4,
        adapter_max_response_tokens={"long": 8},
    )
    kept, counts, _ = filter_samples(samples, config)
    assert [s.adapter for s in kept] == ["long"] and counts == {"overlong": 2}
