"""Turn-level returns and agent-normalized advantages. Pure functions; formulas below.

**Returns.** For seat p with turns k = 1..K (in turn order) and per-turn rewards r_k::

    G_k = sum_{j >= k} gamma^(j - k) * r_j        (gamma per turn, never per token)

The rollout side puts a seat's final outcome on the seat's last turn (``Turn.reward``), so
G_k already carries it; ``Episode.final_rewards`` is read only by the ``broadcast`` mode.
A seat's *trajectory* is its turns in one episode, (episode, seat); its return R is G_1, the
return of its first turn (with gamma = 1, the seat's total reward in the episode).

**Keys.** Advantages are computed per *key*: a tuple of sample fields, (game, agent) by
default, so that agents whose expected returns differ never share a baseline. The fields are
``game``, ``role``, ``seat``, ``group`` (the prompt-group id), ``prompt`` (a digest of the exact
prompt ids, :attr:`trainers.batch.Sample.prompt`) and ``agent``, where::

    agent = seat   if the turn's role is "player" (every seat plays the same role: self-play)
    agent = role   otherwise (a role game: proposer, solver, judge, ...)

In self-play every seat plays the ``player`` role, yet seat 0 and seat 1 of Tic-Tac-Toe do not
expect the same return (the first mover wins more), so each seat keeps its own statistics, as
MARS normalizes per player and SPIRAL keeps one baseline per (game, player). In a role game the
roles are what differ: seats proposer_0, solver_0 and solver_1 give the keys proposer, solver
and solver, so k symmetric solver seats share one baseline.

**Modes.**

- ``batch`` (MARS):      A = (G - mu_key) / (sigma_key + eps), mu and sigma over this batch.
- ``ema`` (SPIRAL RAE):  A = G_k - b_key for every turn k of a trajectory, with b_key read
  *before* the trajectory's update b_key <- alpha * b_key + (1 - alpha) * R. The update runs
  once per trajectory (per (episode, seat) and key), with the trajectory's return R = G_1,
  trajectories taken in the batch order of their first turn, so a second trajectory of the
  same key in the batch reads the baseline the first one left. This is SPIRAL's
  ``role_baseline_ema``: one update per player per game, read before the update so that the
  baseline is independent of the return it is subtracted from. (SPIRAL discounts R - b by
  gamma^(steps from the end); with gamma = 1, as it trains, that equals G_k - b.) b_key starts
  at 0 and lives for the whole run (the learner checkpoints it). A batch holds whole
  episodes (trainers/inbox.py), so a trajectory's turns are never split between batches.
- ``ema-turn``:          the per-turn variant: A = G - b_key and b_key <- alpha * b_key +
  (1 - alpha) * G after each turn, one sample at a time in batch order. A K-turn trajectory
  then moves b by 1 - alpha^K of the way instead of 1 - alpha (about 23 % instead of 5 % for
  5 turns at alpha 0.95), so long games weigh more than short ones in the baseline.
- ``group`` (GRPO):      as ``batch``, over samples sharing (key, prompt group id).
- ``broadcast`` (Flow-GRPO): every turn's value is the seat's final outcome (its game return,
  ``Episode.final_rewards[seat]``, without the per-turn shaping; the sum of its turn rewards
  where the episode lists none), then ``group``.

sigma is the population standard deviation (ddof = 0) and eps is ``learner.advantage.eps``
(1e-6 by default), added to sigma. With ``scale_by_std`` off, the division
is dropped (A = G - mu, as Dr. GRPO). A key or group with a single sample, or whose values are
all equal, has no spread to compare against: its advantages are exactly 0 (never NaN), and the
sample stays in the batch (the zero-advantage filter may drop it later, and counts it). The
optional whitening then maps every advantage of the batch to (A - mean) / (std + eps), mean and
population std over the whole batch (left unchanged when there is one, or they are all equal).

**The batch** is one learner step's turns (trainers/learner.py): the trained turns that this
learner trains (its policy's seats, its adapters') of the whole episodes and groups the step
takes (every pending one, or up to ``batch.max_batch_samples`` turns), less the turns the
staleness bound rejects (``batch.stale_mode: reject``; down-weighted ones stay). The overlong,
void and zero-advantage filters act after the advantages, so their turns do count in mu and
sigma. *Batch order*, which the ``ema`` modes depend on, is by episode id (compared as strings)
and then turn index, whatever order the episodes arrived in: ``ema`` with alpha 0.95 and b = 0,
episode ``e2`` (R = 1) arriving before ``e1`` (R = -1), both of one key, updates for ``e1`` first,
b = 0.95 * 0.05 * (-1) + 0.05 * 1 = 0.0025 (arrival order would give -0.0025).

By hand, ``batch`` over one key with G = [1, 0, 0, 1]: mu 0.5, sigma 0.5, A = +-0.5 / 0.500001
= [0.999998, -0.999998, -0.999998, 0.999998]; G = [2, 2]: A = [0, 0]; ``ema`` with alpha 0.95
and b = 0: a won trajectory (G = 1 on each of its turns) gets A = 1 on every turn, then
b = 0.05, and the next won trajectory of that key gets 0.95.

The advantage of turn k applies to every generated token of turn k (see trainers/batch.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

Key = tuple[Hashable, ...]

SELF_PLAY_ROLE = "player"
"""The role every seat plays in symmetric self-play (roles/player.py); its seats are the agents."""


def agent_of(role: str, seat: str) -> str:
    """The ``agent`` key field: the seat when the role is ``player`` (every seat plays the same
    role, so only the seat tells agents apart), otherwise the role (seats of one role in a role
    game, such as k solvers, are one agent). See the module docstring."""
    return seat if role == SELF_PLAY_ROLE else role


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
    """Per-key running baselines b_key, shared by every rollout of a run (SPIRAL's RAE).

    :meth:`advantages` updates once per trajectory (mode ``ema``), :meth:`turn_advantages` once
    per turn (mode ``ema-turn``); both read b before updating it. The state is a dict of
    floats, checkpointed by the learner through :meth:`state_dict`.
    """

    def __init__(self, alpha: float) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        self.alpha = alpha
        self.baselines: dict[Key, float] = {}

    def _update(self, key: Key, value: float) -> float:
        """b_key <- alpha * b_key + (1 - alpha) * value; returns b_key as it was before."""
        baseline = self.baselines.get(key, 0.0)
        self.baselines[key] = self.alpha * baseline + (1.0 - self.alpha) * value
        return baseline

    def advantages(
        self,
        values: Sequence[float],
        keys: Sequence[Key],
        trajectories: Sequence[Hashable],
        trajectory_returns: Sequence[float | None] | None = None,
    ) -> np.ndarray:
        """A_i = G_i - b_key(i), one baseline update per (trajectory, key) (mode ``ema``).

        ``trajectories`` names each sample's trajectory, (episode id, seat) in the learner.
        Each trajectory's baseline is read once, all its turns get G_k minus that value, then
        b_key moves once toward the trajectory's return R: ``trajectory_returns`` of its first
        sample in batch order, or, where that is None or not given, that sample's own value
        (its G_k: G_1 when the trajectory's first turn is in the batch, as batch order
        follows turn order). Trajectories are taken in the order of their first sample.
        """
        values = np.asarray(values, dtype=np.float64)
        if not len(values) == len(keys) == len(trajectories):
            raise ValueError(
                f"{len(values)} values, {len(keys)} keys and {len(trajectories)} trajectories"
            )
        if trajectory_returns is not None and len(trajectory_returns) != len(values):
            raise ValueError(f"{len(trajectory_returns)} trajectory returns for {len(values)}")
        units = _indices_by_key(list(zip(trajectories, keys, strict=True)))
        out = np.zeros_like(values)
        for (_, key), idx in units.items():  # dicts keep first-appearance order
            first = idx[0]
            ret = None if trajectory_returns is None else trajectory_returns[first]
            baseline = self._update(key, float(values[first] if ret is None else ret))
            out[idx] = values[idx] - baseline
        return out

    def turn_advantages(self, values: Sequence[float], keys: Sequence[Key]) -> np.ndarray:
        """A_i = G_i - b_key(i), then b_key <- alpha * b_key + (1 - alpha) * G_i, per sample in
        batch order (mode ``ema-turn``)."""
        out = np.zeros(len(values), dtype=np.float64)
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            out[i] = float(value) - self._update(key, float(value))
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
    trajectories: Sequence[Hashable] | None = None,
    trajectory_returns: Sequence[float | None] | None = None,
) -> np.ndarray:
    """Advantages of one batch of turns in the given mode (see the module docstring).

    ``returns`` are the turn-level G_k, ``outcomes`` each turn's seat's final outcome (used by
    ``broadcast`` only), ``keys`` the agent keys and ``groups`` the prompt-group ids. The
    ``ema`` mode also needs ``trajectories`` (each sample's (episode, seat)) and takes
    ``trajectory_returns`` (each sample's trajectory return R = G_1, see
    :meth:`EMABaseline.advantages`); ``ema`` and ``ema-turn`` need the run's ``ema``.
    """
    if mode == "batch":
        adv = normalize_by_key(returns, keys, eps, scale_by_std)
    elif mode in ("ema", "ema-turn"):
        if ema is None:
            raise ValueError(f"mode {mode!r} needs an EMABaseline")
        if mode == "ema-turn":
            adv = ema.turn_advantages(returns, keys)
        elif trajectories is None:
            raise ValueError("mode 'ema' needs each sample's trajectory id")
        else:
            adv = ema.advantages(returns, keys, trajectories, trajectory_returns)
    elif mode in ("group", "broadcast"):
        values = returns if mode == "group" else outcomes
        group_keys = [(*key, group) for key, group in zip(keys, groups, strict=True)]
        adv = normalize_by_key(values, group_keys, eps, scale_by_std)
    else:
        raise ValueError(f"unknown advantage mode {mode!r}")
    return whiten(adv, eps) if whiten_all else adv


def stats_by_key(values: Iterable[float], keys: Sequence[Key]) -> dict[Key, dict[str, float]]:
    """mean, std (population, ddof = 0), min, max and count of ``values`` per key (for metrics)."""
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
