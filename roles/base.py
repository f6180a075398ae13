"""A role: the text layer between a game seat and a policy.

A role turns what a seat sees into chat messages, and the policy's reply into the action text
the game parses. It owns the system prompt, how a seat's history is shown (``memory``), the
output format, and the format reward. It knows nothing of models or the bus: it works on
strings, and the game does the parsing of moves (``parse_action``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from roles.formats import ANSWER, TagFormat

Message = dict[str, str]


@dataclass(frozen=True)
class Reply:
    """A policy reply read by a role: the action text to play, or None with the reason."""

    action_text: str | None
    format_ok: bool
    reason: str = ""


@dataclass
class Role:
    """Base role: rules in the system prompt, the observation as the user turn."""

    name: str = "role"
    output: TagFormat = ANSWER
    """Where the reply's meaningful part goes."""
    what: str = "your action"
    """How the instruction names what to put in the output format."""
    memory: Literal["none", "conversation"] = "none"
    """``none``: every turn is a fresh prompt (the observation text carries the state);
    ``conversation``: the seat's earlier turns stay in context (token-in, token-out)."""
    prefill: bool = False
    """Start the reply with the output format's opening tag, so a weak model only has to write
    the content and the closing tag. The prefill is part of the prompt, never trained on."""
    format_bonus: float = 0.0
    """Reward added to a turn whose reply is well formed (0 disables format shaping)."""
    example: str | None = None
    """A sample answer shown in the instruction (``<answer>5</answer>``); small models copy the
    format far more reliably from an example than from a description."""
    show_rules: bool = True
    """Put the game's rules in the system prompt. Off, the prompt is the instruction and the
    observation only: much shorter, which matters on a CPU."""
    turn_suffix: str = ""
    """Appended to every observation, e.g. ``"Your move?"``."""

    def system_prompt(self, rules: str, seat: str) -> str:
        instruction = f"You play as {seat}. {self.output.instruction(self.what)}"
        if self.example is not None:
            instruction += f" Example: {self.output.wrap(self.example)}"
        return f"{rules.strip()}\n\n{instruction}" if self.show_rules else instruction

    def messages(self, rules: str, seat: str, observation: str, first_turn: bool) -> list[Message]:
        """Messages for this turn. With ``conversation`` memory, later turns send only the new
        user message, to be appended to the seat's earlier ids by the caller."""
        text = f"{observation}\n{self.turn_suffix}" if self.turn_suffix else observation
        user = {"role": "user", "content": text}
        if self.memory == "conversation" and not first_turn:
            return [user]
        return [{"role": "system", "content": self.system_prompt(rules, seat)}, user]

    def assistant_prefix(self) -> str:
        """Text the reply starts with (part of the prompt)."""
        return self.output.open if self.prefill else ""

    def read(self, reply: str, ended: bool = False) -> Reply:
        """Extract the action text from the policy's reply (the prefix is added here).

        ``ended``: the reply stopped at the end of its turn rather than at the token limit. A
        prefilled reply that ended without the closing tag still counts when it is a single short
        line (the closing tag is implied by the end of the turn), but it is not well formed.
        """
        content = self.output.extract(self.assistant_prefix() + reply)
        if content is not None:
            return Reply(content, True)
        bare = reply.strip()
        if (
            self.prefill
            and ended
            and bare
            and "\n" not in bare
            and "<" not in bare
            and len(bare) <= 80
        ):
            return Reply(bare, False, f"{self.output.close} missing")
        return Reply(None, False, f"no {self.output.open}...{self.output.close} in the reply")

    def format_reward(self, reply: Reply) -> float:
        return self.format_bonus if reply.format_ok else 0.0

    def stop_strings(self) -> tuple[str, ...]:
        """Generation can stop as soon as the output is closed."""
        return (self.output.close,)
