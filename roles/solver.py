"""The solver role: answers a question, its final answer in ``\\boxed{...}`` at the end."""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import BOXED, OutputFormat
from roles.base import Role


@dataclass
class Solver(Role):
    name: str = "solver"
    job: str = "You are {seat}, the solver: answer the question. Think step by step first."
    output: OutputFormat = BOXED
    what: str = "your final answer"
