"""A role: the text layer between a game seat and a policy.

A role turns what a seat sees into chat messages, and the policy's reply into the action text
the game parses. It owns the system prompt (its job, the game's rules, the output instruction),
whether the seat's own earlier turns stay in context (``memory``), the output format and its
strict reader, and the format reward. It knows nothing of models or the bus: it works on
strings. What a seat sees of the other seats is chosen by the game's interaction graph and
rendered by the game into the observation; :func:`render_posts` is the one renderer for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from games.formats import ANSWER, OutputFormat
from games.interaction import Post
from games.interaction import render as render_posts

Message = dict[str, str]

SALVAGE_MAX_CHARS = 80
"""The longest unclosed prefilled reply that :meth:`Role.read` still reads as an action."""


@dataclass(frozen=True)
class Reply:
    """A policy reply read by a role: the action text to play, or None with the reason."""

    action_text: str | None
    """The format's canonical content (what the game receives), or None when unreadable."""
    format_ok: bool
    """The reply was well formed (earns ``format_bonus``)."""
    reason: str = ""
    """Why the reply is not well formed; empty when it is."""


@dataclass
class Role:
    """Base role: rules and instruction in the system prompt, the observation as the user turn.

    Every field can be set per seat through the game's role kwargs (``roles.make(id, **kw)``).
    """

    name: str = "role"
    """Recorded on every turn; the learner keys advantages by it."""
    job: str = "You play as {seat}."
    """The role's job in one or two sentences; ``{seat}`` becomes the seat's name."""
    output: OutputFormat = ANSWER
    """Where the reply's meaningful part goes, and how it is read (``games.formats``)."""
    what: str = "your action"
    """How the instruction names what to put in the output format."""
    memory: Literal["none", "conversation"] = "none"
    """``none``: every turn is a fresh prompt (the observation text carries the state);
    ``conversation``: the seat's earlier turns stay in context (token-in, token-out)."""
    prefill: bool = False
    """Start the reply with the output format's ``prefix`` (``<answer>``), so a weak model only
    has to write the content and the closing tag. The prefill is part of the prompt, never
    trained on. Formats without a prefix ignore it."""
    format_bonus: float = 0.0
    """Reward added to a turn whose reply is well formed (0 disables format shaping)."""
    example: str | None = None
    """Sample content shown wrapped in the output format (``5`` -> ``Example: <answer>5</answer>``);
    small models copy the format far more reliably from an example than from a description.
    Without one, the instruction's shape (``<answer>...</answer>``) is the only example."""
    show_rules: bool = True
    """Put the game's rules in the system prompt. Off, the prompt is the instruction and the
    observation only: much shorter, which matters on a CPU."""
    turn_suffix: str = ""
    """Appended to every observation, e.g. ``"Your move?"``."""

    def __post_init__(self) -> None:
        # A subclass that sets fields without @dataclass keeps the base's defaults: its fields
        # are plain class attributes, which the inherited __init__ overwrites, in silence.
        fields = set(Role.__dataclass_fields__)
        for cls in type(self).__mro__:
            if cls is Role:
                break
            shadowed = (
                sorted(fields & set(vars(cls))) if "__dataclass_fields__" not in vars(cls) else []
            )
            if shadowed:
                raise TypeError(
                    f"{cls.__name__} sets {', '.join(shadowed)} but is not a @dataclass, so a "
                    f"{cls.__name__}() keeps Role's defaults: decorate it with "
                    "@dataclasses.dataclass"
                )

    def system_prompt(self, rules: str, seat: str) -> str:
        """``rules``, a blank line, then the job, the output instruction and the example (last,
        nearest the reply, where a small model attends most)."""
        parts = [self.job.replace("{seat}", seat), self.output.instruction(self.what)]
        if self.example is not None:
            parts.append(f"Example: {self.output.wrap(self.example)}")
        instruction = " ".join(p for p in parts if p)
        return f"{rules.strip()}\n\n{instruction}" if self.show_rules else instruction

    def messages(self, rules: str, seat: str, observation: str, first_turn: bool) -> list[Message]:
        """Messages for this turn. With ``conversation`` memory, later turns send only the new
        user message, to be appended to the seat's earlier ids by the caller."""
        text = f"{observation}\n{self.turn_suffix}" if self.turn_suffix else observation
        user = {"role": "user", "content": text}
        if self.memory == "conversation" and not first_turn:
            return [user]
        return [{"role": "system", "content": self.system_prompt(rules, seat)}, user]

    def render_history(self, posts: Iterable[Post]) -> str:
        """The posts a seat may see, as text (:func:`render_posts`)."""
        return render_posts(posts)

    def assistant_prefix(self) -> str:
        """Text the reply starts with (part of the prompt)."""
        return self.output.prefix if self.prefill else ""

    def read(self, reply: str, ended: bool = False) -> Reply:
        """Read the policy's reply (the prefix is added here) with the format's strict reader.

        ``ended``: the reply stopped at the end of its turn rather than at the token limit. A
        prefilled reply that ended without closing its output still counts when it is a single
        short line that the format accepts once closed (the end of the turn implies the close),
        but it is not well formed.
        """
        content, reason = self.output.read(self.assistant_prefix() + reply)
        if content is not None:
            return Reply(content, True)
        bare = reply.strip()
        if (
            self.prefill
            and ended
            and bare
            and "\n" not in bare
            and "<" not in bare
            and len(bare) <= SALVAGE_MAX_CHARS
        ):
            salvaged = self.output.extract(self.output.wrap(bare))
            if salvaged is not None:
                return Reply(salvaged, False, reason)
        return Reply(None, False, reason)

    def format_reward(self, reply: Reply) -> float:
        return self.format_bonus if reply.format_ok else 0.0

    def stop_strings(self) -> tuple[str, ...]:
        """Generation can stop as soon as the output is closed."""
        return self.output.stops
