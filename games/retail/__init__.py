"""Tool use with a simulated user: a retail support game (after MUA-RL and tau2-bench).

- :mod:`games.retail.db`: the in-memory store (users, orders, items) and its operations, the
  agent's tools; a seeded generator; ``state_hash``;
- :mod:`games.retail.tasks`: customer tasks (goal, persona, facts, ground-truth calls, required
  outputs) drawn from a seed, and ``expected_hash``;
- :mod:`games.retail.game`: :class:`RetailSupport`, the game (seats ``user`` and ``agent``).
"""

from __future__ import annotations

from games.retail.db import RetailDB, RetailError, generate
from games.retail.game import RetailSupport
from games.retail.tasks import KINDS, Task, expected_hash, sample_task

__all__ = [
    "KINDS",
    "RetailDB",
    "RetailError",
    "RetailSupport",
    "Task",
    "expected_hash",
    "generate",
    "sample_task",
]
