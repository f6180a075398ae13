"""The tool call a reply carries: :class:`ToolCall` and its strict JSON reader.

:class:`games.formats.ToolCallFormat` reads a ``<tool_call>`` tag with :func:`parse_tool_call`
and hands the game :meth:`ToolCall.canonical`, the text a :class:`games.tools.Toolbox` calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """A parsed tool call; :meth:`canonical` is the text a game receives for it."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def canonical(self) -> str:
        # Sorted keys make equal calls equal strings; unicode stays readable in transcripts.
        obj = {"name": self.name, "arguments": self.arguments}
        return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        raise ValueError(f"duplicate keys in {[k for k, _ in pairs]}")
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), "a number")


def parse_tool_call(text: str) -> tuple[ToolCall | None, str]:
    """A tool call from its JSON text, strictly: a JSON object (no trailing text, no duplicate
    keys, no NaN) with a non-empty string ``name`` and an object ``arguments``. ``arguments``
    may be left out, meaning a call without arguments (``{}``); any other key is an error."""
    try:
        obj = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except ValueError as err:
        return None, f"the tool call is not valid JSON ({err})"
    if not isinstance(obj, dict):
        return None, f"the tool call must be a JSON object, not {_json_type(obj)}"
    extra = sorted(set(obj) - {"name", "arguments"})
    if extra:
        return None, f"unexpected keys {extra} in the tool call (only name and arguments)"
    if "name" not in obj:
        return None, 'the tool call has no "name"'
    name = obj["name"]
    if not isinstance(name, str) or not name.strip():
        return None, f'"name" must be a non-empty string, not {_json_type(name)} {name!r}'
    arguments = obj.get("arguments", {})
    if not isinstance(arguments, dict):
        return None, f'"arguments" must be a JSON object, not {_json_type(arguments)}'
    return ToolCall(name.strip(), arguments), ""
