"""Planner, executor and verifier (after AgentFlow): a role game of tool use.

- :mod:`games.planner.calculator`: a safe exact calculator (``ast``, never ``eval``);
- :mod:`games.planner.tasks`: tasks that need the tools (arithmetic, corpus look-ups, both);
- :mod:`games.planner.actions`: what the seats write (a plan, a tool call, a verdict), read into
  canonical actions;
- :mod:`games.planner.game`: :class:`PlannerExecutor`, the game (seats ``planner``,
  ``executor``, ``verifier``).
"""

from __future__ import annotations

from games.planner.calculator import CalculatorError, evaluate
from games.planner.game import PlannerExecutor
from games.planner.tasks import KINDS, Task, TaskSampler, check_answer

__all__ = [
    "KINDS",
    "CalculatorError",
    "PlannerExecutor",
    "Task",
    "TaskSampler",
    "check_answer",
    "evaluate",
]
