"""Turn-level returns and agent-normalized advantages. Pure functions; formulas below.

**Returns.** For seat p with turns k = 1..K (in turn order) and per-turn rewards r_k::

    G_k = sum_{j >= k} gamma^(j - k) * r_j        (gamma per turn, never per token)

The rollout side puts a seat's final outcome on the seat's last turn (``Turn.reward``), so
G_k already carries it; ``Episode.final_rewards`` is read only by the ``broadcast`` mode.

**Advantages** are computed per *key*: a tuple of sample fields, (game, role) by default, so
that a proposer's returns never set the baseline of a solver.

- ``batch`` (MARS):      A = (G - mu_key) / (sigma_key + eps), mu and sigma over this batch
- ``ema`` (SPIRAL RAE):  A = G - b_key, then b_key <- alpha * b_key + (1 - alpha) * G.
  b_key is read *before* its update, one sample at a time in batch order, starts at 0, and
  lives for the whole run (the learner checkpoints it).
- ``group`` (GRPO):      as ``batch``, over samples sharing (key, prompt group id)
- ``broadcast`` (Flow-GRPO): every turn's value is the seat's final outcome, then ``group``.

sigma is the population standard deviation (ddof = 0). With ``scale_by_std`` off, the division
is dropped (A = G - mu, as Dr. GRPO). A key or group with a single sample, or whose values are
all equal, has no spread to compare against: its advantages are exactly 0 (never NaN). The
optional whitening rescales all advantages of the batch to mean 0 and std 1 afterwards (left
unchanged when they are all equal).

The advantage of turn k applies to every generated token of turn k (see trainers/batch.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

Key = tuple[Hashable, ...]


def discounted_returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """G_k = r_k + gamma * G_{k+1}, with G_{K+1} = 0, for one seat's turns in order."""
    returns = np.zeros(len(rewards), dtype=np.float64)
    running = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        running = float(rewards[k]) + gamma * running
        returns[k] = running
    return returns


def _indices_by_key(keys: Sequence[Key]) -> dict[Key, list[int]]:
    groups: dict[Key, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[key].append(i)
    return groups


def normalize_by_key(
    values: Sequence[float], keys: Sequence[Key], eps: float = 1e-6, scale_by_std: bool = True
) -> np.ndarray:
    """(v - mu_key) / (sigma_key + eps) per key; 0 for single-sample or constant keys."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) != len(keys):
        raise ValueError(f"{len(values)} values but {len(keys)} keys")
    out = np.zeros_like(values)
    for idx in _indices_by_key(keys).values():
        group = values[idx]
        if len(group) < 2 or np.all(group == group[0]):
            continue  # no spread: exactly 0 rather than 0/eps noise or NaN
        centered = group - group.mean()
        out[idx] = centered / (group.std() + eps) if scale_by_std else centered
    return out


def whiten(values: Sequence[float], eps: float = 1e-6) -> np.ndarray:
    """(v - mean) / (std + eps) over the whole batch; unchanged when all values are equal."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2 or np.all(values == values[0]):
        return values.copy()
    return (values - values.mean()) / (values.std() + eps)


class EMABaseline:
    """Per-key running baselines b_key, shared by every rollout of a run (SPIRAL's RAE)."""

    def __init__(self, alpha: float) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        self.alpha = alpha
        self.baselines: dict[Key, float] = {}

    def advantages(self, values: Sequence[float], keys: Sequence[Key]) -> np.ndarray:
        """A_i = G_i - b_key(i) with b read before b <- alpha * b + (1 - alpha) * G_i, in order."""
        out = np.zeros(len(values), dtype=np.float64)
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            baseline = self.baselines.get(key, 0.0)
            out[i] = float(value) - baseline
            self.baselines[key] = self.alpha * baseline + (1.0 - self.alpha) * float(value)
        return out

    def state_dict(self) -> dict[str, Any]:
        """JSON-ready: keys become lists."""
        return {"alpha": self.alpha, "baselines": [[list(k), b] for k, b in self.baselines.items()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha = float(state["alpha"])
        self.baselines = {tuple(k): float(b) for k, b in state["baselines"]}


def compute_advantages(
    mode: str,
    returns: Sequence[float],
    outcomes: Sequence[float],
    keys: Sequence[Key],
    groups: Sequence[Hashable],
    *,
    eps: float = 1e-6,
    scale_by_std: bool = True,
    whiten_all: bool = False,
    ema: EMABaseline | None = None,
) -> np.ndarray:
    """Advantages of one batch of turns in the given mode (see the module docstring).

    ``returns`` are the turn-level G_k, ``outcomes`` each turn's seat's final outcome (used by
    ``broadcast`` only), ``keys`` the agent keys and ``groups`` the prompt-group ids.
    """
    if mode == "batch":
        adv = normalize_by_key(returns, keys, eps, scale_by_std)
    elif mode == "ema":
        if ema is None:
            raise ValueError("mode 'ema' needs an EMABaseline")
        adv = ema.advantages(returns, keys)
    elif mode in ("group", "broadcast"):
        values = returns if mode == "group" else outcomes
        group_keys = [(*key, group) for key, group in zip(keys, groups, strict=True)]
        adv = normalize_by_key(values, group_keys, eps, scale_by_std)
    else:
        raise ValueError(f"unknown advantage mode {mode!r}")
    return whiten(adv, eps) if whiten_all else adv


def stats_by_key(values: Iterable[float], keys: Sequence[Key]) -> dict[Key, dict[str, float]]:
    """mean, std, min, max and count of ``values`` per key (for metrics)."""
    values = np.asarray(list(values), dtype=np.float64)
    stats = {}
    for key, idx in _indices_by_key(keys).items():
        group = values[idx]
        stats[key] = {
            "mean": float(group.mean()),
            "std": float(group.std()),
            "min": float(group.min()),
            "max": float(group.max()),
            "count": float(len(group)),
        }
    return stats
