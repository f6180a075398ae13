"""Tool calling for games: typed tools, a toolbox that describes them, and calls that never raise.

A game that gives a seat tools (a support agent's database operations, an executor's actions)
builds a :class:`Toolbox` from :class:`Tool` entries::

    box = Toolbox([
        Tool("get_order", "Look up an order.", {"order_id": str}, get_order),
        Tool("find_user", "Find a user.", {"name": str, "email": str}, find_user,
             optional=frozenset({"name", "email"})),
    ])
    box.describe()        # the listing for the prompt, one line per tool
    box.call('{"arguments": {"order_id": "#W1"}, "name": "get_order"}')   # a ToolResult

The input of :meth:`Toolbox.call` is the canonical content of ``games.formats.ToolCallFormat``,
``json.dumps({"name": ..., "arguments": {...}}, sort_keys=True, ensure_ascii=False)``, which
:func:`call_json` writes. A call never raises on bad input: bad JSON, a value that is not an
object, an unknown tool, missing or unknown arguments, an argument of the wrong type, and an
exception raised inside the tool all come back as ``ToolResult(ok=False, error=...)``, whose
:attr:`ToolResult.text` the game shows the agent as the tool's output. A mistake is something to
learn from, not a forfeit.

Types: a parameter's type is ``str``, ``int``, ``float``, ``bool``, ``list``, ``dict`` or
``list[X]`` (each element checked). ``bool`` is not accepted for ``int`` or ``float`` (JSON's
``true`` is not a number); an ``int`` is accepted for ``float`` and passed on as a float.
Arguments in ``Tool.optional`` may be left out; the function then gets its own default.

Names: tool and argument names are matched regardless of case (models vary it), and
:meth:`Toolbox.canonical` rewrites a call with the declared spelling, so that two spellings of
one call are one action.

Errors: a tool signals a refusal of its domain (an order that cannot be cancelled) by raising
:class:`ToolError`; its message is shown as it is. Any other exception is shown with its type.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arena.core.errors import did_you_mean


class ToolError(Exception):
    """A tool's refusal in its own domain; the message is what the agent reads."""


@dataclass(frozen=True)
class Tool:
    """One callable tool: its name, what it does, its typed arguments and the function."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """Argument name -> Python type (``str``, ``int``, ``float``, ``bool``, ``list``, ``dict``,
    ``list[str]``...), in the order the listing shows them."""
    function: Callable[..., Any]
    """Called with the arguments as keywords; returns the output (``str``, or anything JSON can
    write)."""
    optional: frozenset[str] = frozenset()
    """Arguments that may be left out."""

    def __post_init__(self) -> None:
        unknown = set(self.optional) - set(self.parameters)
        if unknown:
            raise ValueError(f"tool {self.name}: optional {sorted(unknown)} are not parameters")
        for arg, kind in self.parameters.items():
            type_name(kind)  # raises on a type the checker cannot read
            if not arg.isidentifier():
                raise ValueError(f"tool {self.name}: argument {arg!r} is not an identifier")

    def signature(self) -> str:
        """``name(arg: type, opt?: type)``."""
        args = ", ".join(
            f"{arg}{'?' if arg in self.optional else ''}: {type_name(kind)}"
            for arg, kind in self.parameters.items()
        )
        return f"{self.name}({args})"


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call: the output, or why the call failed."""

    ok: bool
    output: str
    error: str
    name: str | None
    """The tool called (its declared spelling), or None when the call named no known tool."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """The arguments as read (after the type checks, when they passed)."""

    @property
    def text(self) -> str:
        """What the agent is shown: the output, or ``Error: ...``."""
        return self.output if self.ok else f"Error: {self.error}"


def call_json(name: str, /, **arguments: Any) -> str:
    """The canonical content of a call of ``name`` with ``arguments``."""
    return json.dumps({"arguments": arguments, "name": name}, sort_keys=True, ensure_ascii=False)


_SCALARS: dict[type, str] = {
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    list: "list",
    dict: "dict",
}


def type_name(kind: Any) -> str:
    """How the listing writes a parameter type (``str``, ``list[str]``)."""
    if kind in _SCALARS:
        return _SCALARS[kind]
    if typing.get_origin(kind) is list:
        (inner,) = typing.get_args(kind)
        return f"list[{type_name(inner)}]"
    raise ValueError(f"unsupported tool parameter type {kind!r}")


def _fits(value: Any, kind: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typing.get_origin(kind) is list:
        (inner,) = typing.get_args(kind)
        return isinstance(value, list) and all(_fits(v, inner) for v in value)
    return isinstance(value, kind)


def _json_name(value: Any) -> str:
    """How JSON calls a value's type, which is what the model wrote."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


class Toolbox:
    """A set of tools, described for a prompt and called from canonical JSON."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name.casefold() in (n.casefold() for n in self.tools):
                raise ValueError(f"two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self._by_folded = {n.casefold(): t for n, t in self.tools.items()}

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def describe(self) -> str:
        """One line per tool: ``- name(arg: type, opt?: type): description``."""
        return "\n".join(f"- {t.signature()}: {t.description}" for t in self.tools.values())

    def canonical(self, text: str) -> str:
        """``text`` rewritten as the canonical call (sorted keys, declared spellings of tool and
        argument names), or stripped and otherwise unchanged when it is not a JSON object."""
        try:
            obj = json.loads(text)
        except (ValueError, TypeError):
            return text.strip()
        if not isinstance(obj, dict):
            return text.strip()
        obj = {str(k).casefold(): v for k, v in obj.items()}
        name, args = obj.get("name"), obj.get("arguments")
        if isinstance(name, str):
            tool = self._by_folded.get(name.casefold())
            obj["name"] = tool.name if tool is not None else name.casefold()
            if isinstance(args, dict):
                obj["arguments"] = self._spell(tool, args)
        return json.dumps(obj, sort_keys=True, ensure_ascii=False)

    @staticmethod
    def _spell(tool: Tool | None, args: Mapping[str, Any]) -> dict[str, Any]:
        declared = {a.casefold(): a for a in tool.parameters} if tool else {}
        return {declared.get(str(k).casefold(), str(k).casefold()): v for k, v in args.items()}

    def call(self, text: str) -> ToolResult:
        """Run the call ``text`` names; every failure is a ``ToolResult`` with ``ok=False``."""
        try:
            obj = json.loads(text)
        except (ValueError, TypeError) as err:
            return _fail(
                f"the tool call is not valid JSON ({err}); write "
                '{"name": TOOL, "arguments": {...}}'
            )
        if not isinstance(obj, dict):
            return _fail(
                f'a tool call is a JSON object {{"name": TOOL, "arguments": {{...}}}}, '
                f"not a JSON {_json_name(obj)}"
            )
        obj = {str(k).casefold(): v for k, v in obj.items()}
        extra = sorted(set(obj) - {"name", "arguments"})
        if extra:
            return _fail(f"a tool call has only 'name' and 'arguments', not {extra}")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            return _fail("the tool call names no tool: give 'name' as a string")
        tool = self._by_folded.get(name.casefold())
        if tool is None:
            hint = did_you_mean(name, self.tools)
            return _fail(
                f"{_end(f'unknown tool {name!r}{hint}')} The tools are {', '.join(self.tools)}"
            )
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            return _fail(
                f"{tool.name}: 'arguments' must be a JSON object, not a JSON {_json_name(args)}",
                tool.name,
            )
        args = self._spell(tool, args)
        problem = _check_arguments(tool, args)
        if problem:
            return _fail(problem, tool.name, args)
        args = {
            a: float(v) if tool.parameters[a] is float else v for a, v in args.items()
        }  # an int given for a float is passed on as the float it means
        try:
            output = tool.function(**args)
        except ToolError as err:
            return _fail(str(err), tool.name, args)
        except Exception as err:  # a tool's bug is the agent's tool output, never a crash
            return _fail(f"{tool.name} failed: {type(err).__name__}: {err}", tool.name, args)
        if not isinstance(output, str):
            output = json.dumps(output, sort_keys=True, default=str)
        return ToolResult(True, output, "", tool.name, args)


def _check_arguments(tool: Tool, args: Mapping[str, Any]) -> str:
    """Why ``args`` do not fit ``tool``, or ``""``."""
    unknown = [a for a in args if a not in tool.parameters]
    if unknown:
        hints = "".join(did_you_mean(a, tool.parameters) for a in unknown)
        listed = ", ".join(map(repr, unknown))
        return (
            f"{_end(f'{tool.name} takes no argument {listed}{hints}')} It takes {tool.signature()}"
        )
    missing = [a for a in tool.parameters if a not in args and a not in tool.optional]
    if missing:
        needed = ", ".join(f"{a} ({type_name(tool.parameters[a])})" for a in missing)
        return f"{tool.name} is missing argument(s) {needed}. It takes {tool.signature()}"
    for arg, value in args.items():
        kind = tool.parameters[arg]
        if not _fits(value, kind):
            return (
                f"{tool.name}: argument {arg!r} must be {type_name(kind)}, "
                f"got {_json_name(value)} {json.dumps(value, default=str)[:60]}"
            )
    return ""


def _end(sentence: str) -> str:
    """``sentence`` with a full stop, unless it ends in a question mark (a did-you-mean)."""
    return sentence if sentence.endswith("?") else f"{sentence}."


def _fail(error: str, name: str | None = None, args: Mapping[str, Any] | None = None) -> ToolResult:
    return ToolResult(False, "", error, name, dict(args or {}))


__all__ = ["Tool", "ToolError", "ToolResult", "Toolbox", "call_json", "type_name"]
