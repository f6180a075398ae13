"""The verifier role: decides whether a task is done, ``<verdict>STOP</verdict>`` or
``<verdict>CONTINUE</verdict>`` (case-insensitive; canonical content upper case)."""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import VERDICT, OutputFormat
from roles.base import Role


@dataclass
class Verifier(Role):
    name: str = "verifier"
    job: str = (
        "You are {seat}, the verifier: say STOP if the task is solved, or CONTINUE if more steps "
        "are needed."
    )
    output: OutputFormat = VERDICT
    what: str = "your verdict"
