"""Which turns a step trains on: the staleness bound and the zero-advantage, void and overlong
filters. Each returns the kept samples and a count per reason, which become metrics; and how
stale a step's turns were (:func:`staleness_metrics`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from trainers.batch import Sample
from trainers.config import BatchConfig

ZERO_ADVANTAGE_TOL = 1e-8
"""|A| at or below this counts as zero (EMA baselines leave float dust)."""


def apply_staleness(
    samples: list[Sample], version: int, config: BatchConfig
) -> tuple[list[Sample], Counter[str]]:
    """Drop or down-weight turns generated more than ``max_staleness`` versions ago.

    lag = version - policy_version. In ``downweight`` mode a stale turn's weight becomes
    stale_decay ** (lag - max_staleness), so the bound's first violation already halves it
    (with the default decay of 0.5).
    """
    kept: list[Sample] = []
    counts: Counter[str] = Counter()
    for sample in samples:
        excess = version - sample.policy_version - config.max_staleness
        if excess <= 0:
            kept.append(sample)
        elif config.stale_mode == "reject":
            counts["stale_rejected"] += 1
        else:
            sample.weight *= config.stale_decay**excess
            counts["stale_downweighted"] += 1
            kept.append(sample)
    return kept, counts


def is_overlong(sample: Sample, config: BatchConfig) -> bool:
    """Longer than the learner's context, or cut off at the sampler's generation limit."""
    if sample.num_tokens > config.max_seq_len:
        return True
    limit = config.adapter_max_response_tokens.get(sample.adapter or "", config.max_response_tokens)
    return config.filter_overlong and limit is not None and len(sample.response_ids) >= limit


def filter_samples(
    samples: list[Sample], config: BatchConfig
) -> tuple[list[Sample], Counter[str], list[Sample]]:
    """Apply the overlong, void and zero-advantage filters (in that order of reporting).

    Turns longer than ``max_seq_len`` are always dropped, since they cannot be trained on.
    Run it after the advantages are computed: filtered turns still count in the statistics
    that normalize the others. Returns the kept turns, a count per reason, and the turns the
    zero-advantage filter dropped: their policy gradient is 0, so they are left out of the
    passes only to save compute, and still count in the loss's normalizer (trainers/update.py).
    """
    kept: list[Sample] = []
    silent: list[Sample] = []
    counts: Counter[str] = Counter()
    for sample in samples:
        if is_overlong(sample, config):
            counts["overlong"] += 1
        elif config.filter_void and not sample.valid:
            counts["void"] += 1
        elif config.filter_zero_advantage and abs(sample.advantage) <= ZERO_ADVANTAGE_TOL:
            counts["zero_advantage"] += 1
            silent.append(sample)
        else:
            kept.append(sample)
    return kept, counts, silent


def staleness_metrics(policy_versions: Sequence[int], version: int) -> dict[str, float]:
    """How stale a step's turns are: per turn, the learner's version at the step minus the
    version of the policy that generated it (``Turn.policy_version``), as ``staleness_mean``,
    ``staleness_p50`` (the median) and ``staleness_max``. Every turn the step took counts,
    those the staleness bound then drops or down-weights included (``filtered/stale_*`` counts
    them). In sync mode every turn is 0 versions old; in async mode turns generated while the
    learner trained are older (``arena train`` paces them to at most
    ``batch.max_staleness`` versions). Empty when there are no turns."""
    if not policy_versions:
        return {}
    lags = version - np.asarray(policy_versions, dtype=np.float64)
    return {
        "staleness_mean": float(lags.mean()),
        "staleness_p50": float(np.median(lags)),
        "staleness_max": float(lags.max()),
    }
