"""games/tools.py: typed tools, the prompt listing, and calls that turn every mistake into a
tool error instead of an exception.

Run with `.venv/bin/python -m pytest -q tests/games/test_tools.py`.
"""

from __future__ import annotations

import json

import pytest

from games.tools import Tool, Toolbox, ToolError, ToolResult, call_json


def _cancel(order_id: str) -> str:
    raise ToolError(f"order {order_id} is delivered; only pending orders can be cancelled")


@pytest.fixture
def box() -> Toolbox:
    return Toolbox(
        [
            Tool("add", "Add two whole numbers.", {"a": int, "b": int}, lambda a, b: a + b),
            Tool("divide", "Divide a by b.", {"a": float, "b": float}, lambda a, b: a / b),
            Tool(
                "find_user",
                "Find a user by name or email.",
                {"name": str, "email": str},
                lambda name="-", email="-": f"{name}|{email}",
                optional=frozenset({"name", "email"}),
            ),
            Tool("count", "Count ids.", {"ids": list[str]}, lambda ids: {"n": len(ids)}),
            Tool("cancel", "Cancel an order.", {"order_id": str}, _cancel),
        ]
    )


def test_describe_lists_every_tool_with_typed_arguments(box: Toolbox) -> None:
    assert box.describe() == (
        "- add(a: int, b: int): Add two whole numbers.\n"
        "- divide(a: float, b: float): Divide a by b.\n"
        "- find_user(name?: str, email?: str): Find a user by name or email.\n"
        "- count(ids: list[str]): Count ids.\n"
        "- cancel(order_id: str): Cancel an order."
    )
    assert box.names == ["add", "divide", "find_user", "count", "cancel"]


def test_a_good_call_returns_the_output(box: Toolbox) -> None:
    result = box.call(call_json("add", a=2, b=3))
    assert result == ToolResult(True, "5", "", "add", {"a": 2, "b": 3})
    assert result.text == "5"
    # a non-string output is written as JSON
    assert box.call(call_json("count", ids=["x", "y"])).output == '{"n": 2}'


def test_call_json_is_the_canonical_content() -> None:
    assert call_json("get_order", order_id="#W1") == (
        '{"arguments": {"order_id": "#W1"}, "name": "get_order"}'
    )
    assert call_json("greet", name="Zoë") == '{"arguments": {"name": "Zoë"}, "name": "greet"}'


def test_optional_arguments_may_be_left_out(box: Toolbox) -> None:
    assert box.call(call_json("find_user", email="a@b.c")).output == "-|a@b.c"
    assert box.call(call_json("find_user")).output == "-|-"
    # "arguments" itself may be left out: a call without arguments
    assert box.call('{"name": "find_user"}').output == "-|-"


def test_an_int_is_accepted_for_a_float_and_passed_as_a_float(box: Toolbox) -> None:
    result = box.call(call_json("divide", a=1, b=4))
    assert result.ok and result.output == "0.25"
    assert result.arguments == {"a": 1.0, "b": 4.0}
    assert all(type(v) is float for v in result.arguments.values())


@pytest.mark.parametrize(
    ("text", "error", "name"),
    [
        (
            "get_order #W1",
            "the tool call is not valid JSON (Expecting value: line 1 column 1 (char 0)); "
            'write {"name": TOOL, "arguments": {...}}',
            None,
        ),
        (
            "[1, 2]",
            'a tool call is a JSON object {"name": TOOL, "arguments": {...}}, not a JSON array',
            None,
        ),
        ('{"arguments": {}}', "the tool call names no tool: give 'name' as a string", None),
        ('{"name": 7}', "the tool call names no tool: give 'name' as a string", None),
        (
            '{"name": "add", "args": {"a": 1}}',
            "a tool call has only 'name' and 'arguments', not ['args']",
            None,
        ),
        (
            call_json("ad"),
            "unknown tool 'ad'; did you mean 'add'? The tools are add, divide, find_user, "
            "count, cancel",
            None,
        ),
        (
            call_json("refund_everything"),
            "unknown tool 'refund_everything'. The tools are add, divide, find_user, count, cancel",
            None,
        ),
        (
            '{"name": "add", "arguments": [1, 2]}',
            "add: 'arguments' must be a JSON object, not a JSON array",
            "add",
        ),
        (
            call_json("add", a=2),
            "add is missing argument(s) b (int). It takes add(a: int, b: int)",
            "add",
        ),
        (
            call_json("add", a=2, b=3, c=4),
            "add takes no argument 'c'. It takes add(a: int, b: int)",
            "add",
        ),
        (
            call_json("add", a=2, bb=3),
            "add takes no argument 'bb'; did you mean 'b'? It takes add(a: int, b: int)",
            "add",
        ),
        (call_json("add", a=True, b=3), "add: argument 'a' must be int, got boolean true", "add"),
        (call_json("add", a="2", b=3), "add: argument 'a' must be int, got string \"2\"", "add"),
        (call_json("add", a=2.5, b=3), "add: argument 'a' must be int, got number 2.5", "add"),
        (
            call_json("divide", a=False, b=3),
            "divide: argument 'a' must be float, got boolean false",
            "divide",
        ),
        (
            call_json("count", ids=["a", 3]),
            "count: argument 'ids' must be list[str], got array [\"a\", 3]",
            "count",
        ),
        (
            call_json("count", ids="a"),
            "count: argument 'ids' must be list[str], got string \"a\"",
            "count",
        ),
        (
            call_json("cancel", order_id="#W1"),
            "order #W1 is delivered; only pending orders can be cancelled",
            "cancel",
        ),
        (
            call_json("divide", a=1, b=0),
            "divide failed: ZeroDivisionError: float division by zero",
            "divide",
        ),
    ],
)
def test_every_mistake_is_a_tool_error_not_an_exception(
    box: Toolbox, text: str, error: str, name: str | None
) -> None:
    result = box.call(text)
    assert (result.ok, result.output, result.error, result.name) == (False, "", error, name)
    assert result.text == f"Error: {error}"


def test_names_are_read_regardless_of_case_and_canonical_uses_the_declared_spelling(
    box: Toolbox,
) -> None:
    shouted = '{"NAME": "ADD", "Arguments": {"A": 1, "b": 2}}'
    assert box.call(shouted) == ToolResult(True, "3", "", "add", {"a": 1, "b": 2})
    assert box.canonical(shouted) == call_json("add", a=1, b=2)
    # unknown names are case-folded, so two spellings are still one action
    assert box.canonical('{"name": "ZAP", "arguments": {"Q": 1}}') == call_json("zap", q=1)
    # what is not a JSON object stays as written (stripped), for call() to report
    assert box.canonical("  not json \n") == "not json"
    assert box.canonical("[1]") == "[1]"
    assert json.loads(box.canonical(' {"name": "add", "arguments": {"b": 2, "a": 1}} ')) == {
        "name": "add",
        "arguments": {"a": 1, "b": 2},
    }


def test_a_toolbox_refuses_bad_declarations() -> None:
    tool = Tool("a", "A.", {}, lambda: "")
    with pytest.raises(ValueError, match="two tools are named 'A'"):
        Toolbox([tool, Tool("A", "Also a.", {}, lambda: "")])
    with pytest.raises(ValueError, match=r"optional \['x'\] are not parameters"):
        Tool("b", "B.", {"y": str}, lambda y: y, optional=frozenset({"x"}))
    with pytest.raises(ValueError, match="unsupported tool parameter type"):
        Tool("c", "C.", {"y": set}, lambda y: y)
