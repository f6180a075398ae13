"""The planner role: picks the next subgoal and the tool to reach it.

Output: ``<subgoal>...</subgoal>`` then ``<tool>...</tool>`` (canonical content: both tags, one
per line, in that order). The game passes its tool names in ``what`` or the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import SUBGOAL_TOOL, OutputFormat
from roles.base import Role


@dataclass
class Planner(Role):
    name: str = "planner"
    job: str = (
        "You are {seat}, the planner: choose the next subgoal toward solving the task, and the "
        "tool that should carry it out."
    )
    output: OutputFormat = SUBGOAL_TOOL
    what: str = "the next subgoal and its tool"
