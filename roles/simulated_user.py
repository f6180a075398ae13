"""The simulated user: the customer of a tool-using assistant, writing plain-text messages.

Its goal (and persona) reach it in the observation, which the game keeps private to this seat.
When the goal is met it ends its message with ``###STOP###``. The marker is a stop string, so
generation ends right after it; the episode runner decodes the generated ids whole, so the
marker is in the text this role reads, and the format keeps it in the action text: the game
sees the user stop.
"""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import USER_TEXT, OutputFormat
from roles.base import Role


@dataclass
class SimulatedUser(Role):
    name: str = "simulated_user"
    job: str = (
        "You are {seat}, a user talking to an assistant: pursue your goal one message at a "
        "time, and end the conversation once it is met."
    )
    output: OutputFormat = USER_TEXT
    what: str = "your next message to the assistant"
