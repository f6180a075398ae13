"""95% intervals for proportions and means: Wilson, the percentile bootstrap, and its draws.

Pure functions shared by the evaluation summaries, the per-pair tables and the ratings, so every
interval Arena prints is computed one way. The bootstraps resample *clusters* (a match and its
seat-swapped twin, :func:`arena.eval.match_log.clusters`), never single matches.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

Z95 = 1.959964
"""The two-sided 95% normal quantile."""
DEFAULT_RESAMPLES = 1000
"""Bootstrap draws: a 10-participant, 2000-match log is rated in about a second."""
MIN_N = 10
"""Fewer games than this (episodes, for a role's metric) and an interval is printed as ``n too
small``: over 4 games an interval says next to nothing (4 losses: ``[0.000, 0.490]``), and a
normal-approximation interval of a metric that came out the same in all 4 episodes reads
``[x, x]``, certainty where there is next to no evidence. The JSON files keep the computed
interval."""
TOO_SMALL = "n too small"


def with_interval(value: float, ci: tuple[float, float] | list[float], n: int | None) -> str:
    """``0.750 [0.500, 1.000]``, or ``0.750 (n too small)`` where ``n`` (games or episodes;
    None: unknown, the interval is shown) is below :data:`MIN_N`."""
    if n is not None and n < MIN_N:
        return f"{value:.3f} ({TOO_SMALL})"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def wilson(successes: float, n: int) -> tuple[float, float]:
    """Wilson score 95% interval for a proportion (well-behaved at 0 and 1, unlike the normal one).

    With p = successes / n and z = :data:`Z95`::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z * sqrt(p (1 - p) / n + z^2 / (4 n^2)) / (1 + z^2 / n)
        (max(0, centre - half), min(1, centre + half))

    e.g. 7 of 10: (0.396778, 0.892209); 0 of 10: (0, 0.277533). ``n`` = 0 gives (0, 1).
    ``successes`` may be fractional (a score with draws counted as half a win, see
    :func:`arena.eval.evaluate.score_interval`).
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def json_round(value: float, digits: int) -> float | None:
    """``round`` that turns NaN (no interval could be drawn) into JSON ``null``, and -0.0 into
    0.0."""
    return round(value, digits) + 0.0 if math.isfinite(value) else None


def percentile_ci(samples: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the finite samples (NaN, NaN when there are none)."""
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return (math.nan, math.nan)
    low, high = np.percentile(samples, [2.5, 97.5])
    return (float(low), float(high))


def keyed_rng(seed: int, key: str) -> np.random.Generator:
    """A generator per (seed, key): a pair's interval does not depend on which pairs precede it."""
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def cluster_draws(n_clusters: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each cluster is drawn in each resample: shape (resamples, n_clusters)."""
    return rng.multinomial(n_clusters, np.full(n_clusters, 1 / n_clusters), size=resamples)
