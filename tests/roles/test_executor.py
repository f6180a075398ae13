"""The executor role: golden prompts, and strict reading of tool calls (and messages).

Run with ``.venv/bin/python -m pytest -q tests/roles/test_executor.py``.
"""

from __future__ import annotations

import pytest

import roles
from games.formats import TOOL_CALL, TOOL_CALL_OR_MESSAGE, ToolCall

CALL = '{"name": "get_order", "arguments": {"order_id": "A17"}}'


def test_prompt_is_golden() -> None:
    executor = roles.make("executor-v0", example=CALL, show_rules=False)
    assert executor.messages("R", "executor", "Task: check order A17.", True) == [
        {
            "role": "system",
            "content": "You are executor, the executor: carry out the task by calling one tool "
            'per turn. Reply with one tool call as <tool_call>{"name": "TOOL_NAME", "arguments": '
            '{"ARG": "VALUE"}}</tool_call>. Example: <tool_call>{"name": "get_order", '
            '"arguments": {"order_id": "A17"}}</tool_call>',
        },
        {"role": "user", "content": "Task: check order A17."},
    ]


def test_prompt_with_messages_is_golden() -> None:
    executor = roles.make("executor-v0", allow_message=True, show_rules=False)
    assert executor.messages("R", "agent", "user (message): hi", True) == [
        {
            "role": "system",
            "content": "You are agent, the executor: serve the user by calling one tool per "
            "turn, or by writing to the user. Reply with one tool call or one message: a tool "
            'call as <tool_call>{"name": "TOOL_NAME", "arguments": {"ARG": "VALUE"}}'
            "</tool_call>, or a message as <message>...</message>.",
        },
        {"role": "user", "content": "user (message): hi"},
    ]


def test_reads_tool_calls_strictly() -> None:
    executor = roles.make("executor-v0", format_bonus=0.1)
    assert executor.name == "executor" and executor.output == TOOL_CALL
    assert executor.stop_strings() == ("</tool_call>",)
    reply = executor.read(f"I'll look it up.\n<tool_call>\n{CALL}\n</tool_call>")
    assert reply.action_text == '{"arguments": {"order_id": "A17"}, "name": "get_order"}'
    assert TOOL_CALL.parse(reply.action_text) == ToolCall("get_order", {"order_id": "A17"})
    assert executor.format_reward(reply) == pytest.approx(0.1)
    trailing = executor.read(f"<tool_call>{CALL} and more</tool_call>")
    assert trailing.action_text is None and "Extra data" in trailing.reason
    array = executor.read(f"<tool_call>[{CALL}]</tool_call>")
    assert array.reason == "the tool call must be a JSON object, not an array"
    assert executor.format_reward(array) == 0.0
    # A message is no reply for an executor without the message alternative.
    assert executor.read("<message>hi</message>").action_text is None


def test_prefilled_call_closed_by_the_end_of_turn() -> None:
    executor = roles.make("executor-v0", prefill=True)
    assert executor.assistant_prefix() == "<tool_call>"
    ended = executor.read('{"name": "list_orders"}', ended=True)
    assert (ended.action_text, ended.format_ok) == (
        '{"arguments": {}, "name": "list_orders"}',
        False,
    )
    assert executor.read('{"name": 5}', ended=True).action_text is None


def test_message_alternative() -> None:
    executor = roles.make("executor-v0", allow_message=True, prefill=True)
    assert executor.output == TOOL_CALL_OR_MESSAGE
    assert executor.assistant_prefix() == ""  # the first tag is not known in advance
    assert executor.stop_strings() == ("</tool_call>", "</message>")
    reply = executor.read("<message>Which order do you mean?</message>")
    assert reply.action_text == "<message>Which order do you mean?</message>"
    assert TOOL_CALL_OR_MESSAGE.parse(reply.action_text) == "Which order do you mean?"
    call = executor.read(f"<tool_call>{CALL}</tool_call>").action_text
    assert isinstance(TOOL_CALL_OR_MESSAGE.parse(call or ""), ToolCall)


def test_allow_message_and_an_explicit_output_conflict() -> None:
    with pytest.raises(ValueError, match="allow_message"):
        roles.make("executor-v0", allow_message=True, output=TOOL_CALL_OR_MESSAGE)
    custom = roles.make("executor-v0", allow_message=True, what="a call or a reply")
    assert custom.what == "a call or a reply"
