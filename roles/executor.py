"""The executor role: acts through tools, one Hermes/Qwen-style tool call per turn.

Output: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (canonical content: the
call's JSON with sorted keys). With ``allow_message=True`` (an executor serving a user) it may
instead write ``<message>...</message>``, whose canonical content keeps the tags so the game
tells a message from a call (``games.formats.ToolCallFormat.parse``).
"""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import TOOL_CALL, TOOL_CALL_OR_MESSAGE, OutputFormat
from roles.base import Role


@dataclass
class Executor(Role):
    name: str = "executor"
    job: str = "You are {seat}, the executor: carry out the task by calling one tool per turn."
    output: OutputFormat = TOOL_CALL  # TOOL_CALL_OR_MESSAGE when allow_message is set
    what: str = "one tool call"
    allow_message: bool = False
    """Let a reply be a ``<message>`` to the user instead of a tool call."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.allow_message:
            if self.output is not TOOL_CALL:
                raise ValueError("allow_message sets the executor's output; give one or the other")
            self.output = TOOL_CALL_OR_MESSAGE
            # Reword only the defaults: a job or what the game chose stays as it is.
            if self.job == Executor.job:
                self.job = (
                    "You are {seat}, the executor: serve the user by calling one tool per turn, "
                    "or by writing to the user."
                )
            if self.what == "one tool call":
                self.what = "one tool call or one message"
