"""Output formats: how a policy is asked to write the meaningful part of a reply, and how it is
read back into the *canonical content* a game receives.

The formats live in ``games`` (not ``roles``) because both sides need them: a role reads the
policy's reply into canonical content, and the game parses that same canonical text (games may
not import roles). Every format has

- ``instruction(what)``: the sentence that asks for it, with its shape;
- ``read(text) -> Reading(content, reason)``: the strict reader. ``content`` is the canonical
  content, or None with ``reason`` saying why the reply is malformed (``""`` when it is not);
- ``extract(text)``: ``read(text).content``;
- ``wrap(content)``: the reply that carries ``content`` (used for examples and prefills);
- ``prefix`` (what a prefilled reply starts with) and ``stops`` (strings generation may stop
  at, once the output is closed).

Shared reading rules:

- **Last wins.** The last well-formed occurrence counts: models often restate a draft before
  committing. If that last occurrence is empty, the reply is malformed (no falling back).
- **Innermost wins.** An occurrence is an opening tag and the first closing tag after it with no
  other opening of the same tag in between, so ``<answer><answer>3</answer></answer>`` reads
  ``3``; stray tags around it are ignored.
- **Tag names are case-insensitive** (``<Answer>`` reads like ``<answer>``); content keeps its
  case and is stripped of surrounding whitespace; unicode is kept as written.
- **Unclosed is absent.** ``<answer>5`` (cut off by the token limit) is malformed, with a reason
  that says the tag was not closed; an earlier closed occurrence still counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from games.tool_calls import ToolCall, parse_tool_call


class Reading(NamedTuple):
    """What a strict reader made of a reply: the canonical content, or None and why not."""

    content: str | None
    reason: str = ""


class OutputFormat:
    """The interface every format implements (see the module docstring)."""

    @property
    def prefix(self) -> str:
        return ""

    @property
    def stops(self) -> tuple[str, ...]:
        return ()

    def instruction(self, what: str) -> str:
        raise NotImplementedError

    def read(self, text: str) -> Reading:
        raise NotImplementedError

    def extract(self, text: str) -> str | None:
        return self.read(text).content

    def wrap(self, content: str) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class TagFormat(OutputFormat):
    """Content between ``<tag>`` and ``</tag>``; canonical content: that content, stripped."""

    tag: str

    @property
    def open(self) -> str:
        return f"<{self.tag}>"

    @property
    def close(self) -> str:
        return f"</{self.tag}>"

    @property
    def prefix(self) -> str:
        return self.open

    @property
    def stops(self) -> tuple[str, ...]:
        return (self.close,)

    def instruction(self, what: str) -> str:
        return f"Reply with {what} inside {self.open}{self.close}, e.g. {self.open}...{self.close}."

    def last(self, text: str) -> re.Match[str] | None:
        """The last innermost ``<tag>...</tag>`` (group 1 is the raw content), or None."""
        tag = re.escape(self.tag)
        pattern = rf"<{tag}>((?:(?!<{tag}>).)*?)</{tag}>"
        matches = list(re.finditer(pattern, text, flags=re.DOTALL | re.IGNORECASE))
        return matches[-1] if matches else None

    def present(self, text: str) -> bool:
        """Whether the reply opens this tag at all (closed or not)."""
        return self.open.lower() in text.lower()

    def read(self, text: str) -> Reading:
        match = self.last(text)
        if match is None:
            if self.present(text):
                return Reading(None, f"{self.open} is not closed with {self.close}")
            return Reading(None, f"no {self.open}...{self.close} in the reply")
        content = match.group(1).strip()
        if not content:
            return Reading(None, f"empty {self.open}{self.close}")
        return Reading(content)

    def wrap(self, content: str) -> str:
        return f"{self.open}{content}{self.close}"


def _markup_of(tags: tuple[str, ...], content: str) -> str | None:
    """The first of ``tags`` whose opening or closing tag appears in ``content``, or None.
    Content holding another field's markup could not be read back from the canonical text."""
    lowered = content.lower()
    for tag in tags:
        if f"<{tag}>".lower() in lowered or f"</{tag}>".lower() in lowered:
            return tag
    return None


@dataclass(frozen=True)
class ChoiceFormat(TagFormat):
    """A :class:`TagFormat` whose content must be one of ``choices`` (case-insensitive);
    canonical content: the choice as declared (``STOP``, not ``stop``)."""

    choices: tuple[str, ...] = ()

    def instruction(self, what: str) -> str:
        options = [self.wrap(c) for c in self.choices]
        listed = " or ".join(options) if len(options) <= 2 else ", ".join(options)
        return f"Reply with {what}: {listed}."

    def read(self, text: str) -> Reading:
        content, reason = super().read(text)
        if content is None:
            return Reading(None, reason)
        for choice in self.choices:
            if content.casefold() == choice.casefold():
                return Reading(choice)
        return Reading(
            None, f"{self.open} must be one of {', '.join(self.choices)}, not {content!r}"
        )


@dataclass(frozen=True)
class BoxedFormat(OutputFormat):
    """Content of the last ``\\boxed{...}``, with nested braces balanced (``\\{`` and ``\\}`` are
    literal braces); canonical content: that content, stripped. ``\\boxed{\\boxed{3}}`` reads
    ``3`` (the last opening that is closed)."""

    @property
    def prefix(self) -> str:
        return "\\boxed{"

    # No stop string: a "}" may close an inner brace, so generation runs to the end of turn.

    def instruction(self, what: str) -> str:
        return f"Put {what} in \\boxed{{}} at the end."

    def read(self, text: str) -> Reading:
        starts = [m.end() for m in re.finditer(r"\\boxed\{", text)]
        if not starts:
            return Reading(None, "no \\boxed{...} in the reply")
        for start in reversed(starts):
            end = _closing_brace(text, start)
            if end is not None:
                content = text[start:end].strip()
                return Reading(content) if content else Reading(None, "empty \\boxed{}")
        return Reading(None, "\\boxed{ is not closed with }")

    def wrap(self, content: str) -> str:
        return f"\\boxed{{{content}}}"


def _closing_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the brace opened just before ``start``, or None."""
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character, e.g. \{ or \}, never opens or closes
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return i
        i += 1
    return None


@dataclass(frozen=True)
class TagsFormat(OutputFormat):
    """Several tags in one reply, e.g. ``<question>..</question><answer>..</answer>``.

    Each tag is read like a :class:`TagFormat` (last innermost occurrence). A tag in ``required``
    (default: all) must be there; an optional tag may be absent, but one that is opened must be
    well formed. No field may contain another declared tag's markup. Canonical content: the
    fields found, re-wrapped one per line in declared order, so a game reads it back with
    :meth:`fields` (or :meth:`read`) of the same format.
    """

    tags: tuple[str, ...] = ("question", "answer")
    required: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.tags or len(set(self.tags)) != len(self.tags):
            raise ValueError(f"TagsFormat needs distinct tags, got {self.tags}")
        unknown = set(self.needed) - set(self.tags)
        if unknown:
            raise ValueError(f"required tags {sorted(unknown)} are not among {self.tags}")

    @property
    def needed(self) -> tuple[str, ...]:
        return self.tags if self.required is None else self.required

    @property
    def prefix(self) -> str:
        return f"<{self.tags[0]}>"

    @property
    def stops(self) -> tuple[str, ...]:
        # The instruction asks for the declared order, so the last tag closes the reply.
        return (f"</{self.tags[-1]}>",)

    def instruction(self, what: str) -> str:
        shape = " then ".join(f"<{t}>...</{t}>" for t in self.tags)
        optional = [f"<{t}>" for t in self.tags if t not in self.needed]
        note = f" ({', '.join(optional)} may be left out)" if optional else ""
        return f"Reply with {what}, written as {shape}{note}."

    def fields(self, text: str) -> dict[str, str] | None:
        """The fields of a reply or of canonical content, tag -> content; None if malformed."""
        return self._fields(text)[0]

    def read(self, text: str) -> Reading:
        found, reason = self._fields(text)
        return Reading(None, reason) if found is None else Reading(self.wrap(found))

    def _fields(self, text: str) -> tuple[dict[str, str] | None, str]:
        found: dict[str, str] = {}
        for tag in self.tags:
            single = TagFormat(tag)
            content, reason = single.read(text)
            if content is None:
                if tag in self.needed or single.present(text):
                    return None, reason
                continue
            other = _markup_of(self.tags, content)
            if other is not None:
                return None, f"{single.open} must not contain <{other}> tags"
            found[tag] = content
        return found, ""

    def wrap(self, content: str | Mapping[str, str]) -> str:
        """Canonical text for ``{tag: content}``; a string is taken as canonical already."""
        if isinstance(content, str):
            return content
        unknown = set(content) - set(self.tags)
        if unknown:
            raise ValueError(f"tags {sorted(unknown)} are not among {self.tags}")
        return "\n".join(f"<{t}>{content[t]}</{t}>" for t in self.tags if t in content)


@dataclass(frozen=True)
class ToolCallFormat(OutputFormat):
    """A Hermes/Qwen-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
    validated by :func:`parse_tool_call`; canonical content: :meth:`ToolCall.canonical`.

    With ``message_tag`` (e.g. ``"message"``) the reply may instead be ``<message>text</message>``
    (an executor answering its user); canonical content of a message: ``<message>text</message>``,
    so a game tells the two apart with :meth:`parse`. When a reply has both, the one that ends
    last wins, like every other format.
    """

    tag: str = "tool_call"
    message_tag: str | None = None

    @property
    def prefix(self) -> str:
        # With a message alternative the reply's first tag is not known in advance.
        return "" if self.message_tag else f"<{self.tag}>"

    @property
    def stops(self) -> tuple[str, ...]:
        closes = [f"</{self.tag}>"] + ([f"</{self.message_tag}>"] if self.message_tag else [])
        return tuple(closes)

    def instruction(self, what: str) -> str:
        call = f'<{self.tag}>{{"name": "TOOL_NAME", "arguments": {{"ARG": "VALUE"}}}}</{self.tag}>'
        if not self.message_tag:
            return f"Reply with {what} as {call}."
        message = f"<{self.message_tag}>...</{self.message_tag}>"
        return f"Reply with {what}: a tool call as {call}, or a message as {message}."

    def read(self, text: str) -> Reading:
        call_tag = TagFormat(self.tag)
        call = call_tag.last(text)
        message = TagFormat(self.message_tag).last(text) if self.message_tag else None
        if message is not None and (call is None or message.end() > call.end()):
            return self._message(message.group(1))
        if call is None:
            if not self.message_tag:
                return call_tag.read(text)
            for single in (call_tag, TagFormat(self.message_tag)):
                if single.present(text):
                    return single.read(text)  # opened, never closed
            either = f"{call_tag.open}...{call_tag.close} or <{self.message_tag}>...</{self.message_tag}>"
            return Reading(None, f"no {either} in the reply")
        if not call.group(1).strip():
            return Reading(None, f"empty {call_tag.open}{call_tag.close}")
        found, reason = parse_tool_call(call.group(1))
        return Reading(None, reason) if found is None else Reading(found.canonical())

    def _message(self, raw: str) -> Reading:
        assert self.message_tag is not None
        content = raw.strip()
        if not content:
            return Reading(None, f"empty <{self.message_tag}></{self.message_tag}>")
        other = _markup_of((self.tag, self.message_tag), content)
        if other is not None:
            return Reading(None, f"<{self.message_tag}> must not contain <{other}> tags")
        return Reading(f"<{self.message_tag}>{content}</{self.message_tag}>")

    def parse(self, content: str) -> ToolCall | str | None:
        """Canonical content back into a :class:`ToolCall`, or a message's text (a ``str``), or
        None when it is neither (e.g. the raw text of a malformed reply)."""
        text = content.strip()
        if self.message_tag and text.startswith(opened := f"<{self.message_tag}>"):
            # A message is canonical exactly when reading it gives it back unchanged.
            if self.read(text).content != text:
                return None
            return text[len(opened) : -len(opened) - 1]
        return parse_tool_call(text)[0]

    def wrap(self, content: str) -> str:
        """A call's JSON wrapped in its tag; a canonical message is returned as it is."""
        if self.message_tag and content.startswith(f"<{self.message_tag}>"):
            return content
        return f"<{self.tag}>{content}</{self.tag}>"


@dataclass(frozen=True)
class TextFormat(OutputFormat):
    """The whole reply as plain text (a simulated user's message); empty is malformed.

    With ``end`` (e.g. ``###STOP###``) the reply may finish the conversation by writing that
    marker: it is a stop string, and the canonical content keeps it (cut just after its first
    occurrence), so the game sees that the seat stopped. Canonical content: the text, stripped.
    """

    end: str | None = None

    @property
    def stops(self) -> tuple[str, ...]:
        return (self.end,) if self.end else ()

    def instruction(self, what: str) -> str:
        text = f"Reply with {what} as plain text, without tags."
        if self.end:
            text += f" To end the conversation, write {self.end} at the end of your message."
        return text

    def read(self, text: str) -> Reading:
        if self.end and self.end in text:
            text = text[: text.index(self.end) + len(self.end)]
        content = text.strip()
        return Reading(content) if content else Reading(None, "empty reply")

    def wrap(self, content: str) -> str:
        return content


ANSWER = TagFormat("answer")
QUESTION = TagFormat("question")
SCORE = TagFormat("score")
BOXED = BoxedFormat()
QUESTION_ANSWER = TagsFormat(("question", "answer"))
SUBGOAL_TOOL = TagsFormat(("subgoal", "tool"))
TOOL_CALL = ToolCallFormat()
TOOL_CALL_OR_MESSAGE = ToolCallFormat(message_tag="message")
VERDICT = ChoiceFormat("verdict", choices=("STOP", "CONTINUE"))
STOP_MARKER = "###STOP###"
"""What a simulated user writes to end the conversation."""
USER_TEXT = TextFormat(end=STOP_MARKER)
