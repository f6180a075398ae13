"""The strict reader of a tool call's JSON (games/tool_calls.py)."""

from __future__ import annotations

import pytest

from games.tool_calls import ToolCall, parse_tool_call


def test_parse_tool_call_is_the_games_strict_reader() -> None:
    assert parse_tool_call('{"name": " f ", "arguments": {"x": [1, 2]}}') == (
        ToolCall("f", {"x": [1, 2]}),
        "",
    )
    assert parse_tool_call('{"name": "f"}') == (ToolCall("f", {}), "")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[1]", "the tool call must be a JSON object, not an array"),
        (
            '{"name": "f", "x": 1}',
            "unexpected keys ['x'] in the tool call (only name and arguments)",
        ),
        ('{"arguments": {}}', 'the tool call has no "name"'),
        ('{"name": 3}', '"name" must be a non-empty string, not a number 3'),
        ('{"name": "f", "arguments": []}', '"arguments" must be a JSON object, not an array'),
    ],
)
def test_parse_tool_call_says_what_is_wrong(text: str, reason: str) -> None:
    assert parse_tool_call(text) == (None, reason)


def test_duplicate_keys_and_nan_are_not_json() -> None:
    call, reason = parse_tool_call('{"name": "f", "name": "g"}')
    assert call is None and "duplicate keys in ['name', 'name']" in reason
    call, reason = parse_tool_call('{"name": "f", "arguments": {"x": NaN}}')
    assert call is None and "NaN is not JSON" in reason


def test_canonical_sorts_keys_and_keeps_unicode() -> None:
    assert ToolCall("get", {"z": 1, "a": "é"}).canonical() == (
        '{"arguments": {"a": "é", "z": 1}, "name": "get"}'
    )
