"""Proposer, solver and judge (after Multi-Agent Evolve): a role game over task families with
verifiable answers.

- :mod:`games.mae.families`: the task families (``FAMILIES``), each a tiny problem language
  whose parser computes the true answer: :mod:`games.mae.family` (what a family is),
  :mod:`games.mae.arithmetic` and :mod:`games.mae.ordering`;
- :mod:`games.mae.game`: :class:`ProposerSolverJudge`, the game (seats ``proposer``,
  ``solver_0..``, ``judge``).
"""

from __future__ import annotations

from games.mae.families import FAMILIES, Family, Task
from games.mae.game import ProposerSolverJudge

__all__ = ["FAMILIES", "Family", "ProposerSolverJudge", "Task"]
