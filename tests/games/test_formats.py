"""Output formats: strict readers on valid, malformed and adversarial replies, and round trips
from canonical content back through the same format (what a game does).

Run with ``.venv/bin/python -m pytest -q tests/games/test_formats.py``.
"""

from __future__ import annotations

import json

import pytest

from games.formats import (
    ANSWER,
    BOXED,
    QUESTION_ANSWER,
    SUBGOAL_TOOL,
    TOOL_CALL,
    TOOL_CALL_OR_MESSAGE,
    USER_TEXT,
    VERDICT,
    ChoiceFormat,
    Reading,
    TagsFormat,
    TextFormat,
    ToolCall,
)

# -- TagFormat ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("<answer>5</answer>", "5"),
        ("I think <answer>3</answer> no wait <answer> 5 </answer>", "5"),  # last wins
        ("<answer><answer>3</answer></answer>", "3"),  # innermost wins, stray tags ignored
        ("<answer>1</answer><answer><answer>2</answer>", "2"),
        ("<answer>3</answer> then <answer>5", "3"),  # a later unclosed one does not count
        ("<ANSWER>b2</Answer>", "b2"),  # tag names are case-insensitive
        ("<answer> Ünïcødé 東京 😀 </answer>", "Ünïcødé 東京 😀"),
        ("<answer>line 1\nline 2</answer>", "line 1\nline 2"),
        ("<answer><b>x</b></answer>", "<b>x</b>"),  # other markup is content
    ],
)
def test_tag_format_reads(text: str, content: str) -> None:
    assert ANSWER.read(text) == Reading(content, "")
    assert ANSWER.extract(text) == content


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("answer: 5", "no <answer>...</answer> in the reply"),
        ("5</answer>", "no <answer>...</answer> in the reply"),
        ("<answer>5", "<answer> is not closed with </answer>"),
        ("<answer></answer>", "empty <answer></answer>"),
        ("<answer>5</answer> <answer>  </answer>", "empty <answer></answer>"),  # no falling back
        ("< answer >5</ answer >", "no <answer>...</answer> in the reply"),
        ('<answer value="5"></answer>', "no <answer>...</answer> in the reply"),
    ],
)
def test_tag_format_says_why_it_failed(text: str, reason: str) -> None:
    assert ANSWER.read(text) == Reading(None, reason)
    assert ANSWER.extract(text) is None


def test_tag_format_wrap_prefix_and_stops_round_trip() -> None:
    assert ANSWER.wrap("7") == "<answer>7</answer>"
    assert ANSWER.extract(ANSWER.wrap("é 7")) == "é 7"
    assert (ANSWER.prefix, ANSWER.stops) == ("<answer>", ("</answer>",))
    assert ANSWER.instruction("a move") == (
        "Reply with a move inside <answer></answer>, e.g. <answer>...</answer>."
    )


# -- BoxedFormat -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content"),
    [
        (r"so \boxed{\frac{1}{2}} done", r"\frac{1}{2}"),
        (r"\boxed{1} or rather \boxed{ 2 }", "2"),
        (r"\boxed{\boxed{3}}", "3"),  # the last opening that is closed
        (r"\boxed{1} and \boxed{2", "1"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces are literal
        (r"\boxed{x^{2^{3}}}", "x^{2^{3}}"),
        (r"\boxed{π ≈ 3.14}", "π ≈ 3.14"),
    ],
)
def test_boxed_reads(text: str, content: str) -> None:
    assert BOXED.read(text) == Reading(content, "")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("the answer is 4", "no \\boxed{...} in the reply"),
        (r"\boxed{unclosed", "\\boxed{ is not closed with }"),
        (r"\boxed{\frac{1}{2}", "\\boxed{ is not closed with }"),
        (r"\boxed{\}", "\\boxed{ is not closed with }"),
        (r"\boxed{ }", "empty \\boxed{}"),
    ],
)
def test_boxed_says_why_it_failed(text: str, reason: str) -> None:
    assert BOXED.read(text) == Reading(None, reason)


def test_boxed_wrap_and_stops() -> None:
    assert BOXED.wrap("42") == r"\boxed{42}"
    assert BOXED.extract(BOXED.wrap(r"\frac{1}{2}")) == r"\frac{1}{2}"
    assert BOXED.stops == ()  # a "}" may close an inner brace


# -- TagsFormat --------------------------------------------------------------------------------


def test_tags_canonical_content_is_declared_order_one_per_line() -> None:
    reply = "Here: <answer> 4 </answer> and <question>What is 2+2?</question>"
    canonical = "<question>What is 2+2?</question>\n<answer>4</answer>"
    assert QUESTION_ANSWER.read(reply) == Reading(canonical, "")
    # The game reads the canonical content back with the same format.
    assert QUESTION_ANSWER.read(canonical) == Reading(canonical, "")
    assert QUESTION_ANSWER.fields(canonical) == {"question": "What is 2+2?", "answer": "4"}
    assert QUESTION_ANSWER.wrap({"answer": "4", "question": "What is 2+2?"}) == canonical


def test_tags_last_occurrence_of_each_tag_wins() -> None:
    reply = "<question>Q1</question><answer>A1</answer><question>Q2</question><answer>A2</answer>"
    assert QUESTION_ANSWER.fields(reply) == {"question": "Q2", "answer": "A2"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<question>What is 2+2?</question>", "no <answer>...</answer> in the reply"),
        ("<question>Q</question><answer>4", "<answer> is not closed with </answer>"),
        ("<question>Q <answer>4</answer></question>", "<question> must not contain <answer> tags"),
        ("<question></question><answer>4</answer>", "empty <question></question>"),
    ],
)
def test_tags_malformed(text: str, reason: str) -> None:
    assert QUESTION_ANSWER.read(text) == Reading(None, reason)
    assert QUESTION_ANSWER.fields(text) is None


def test_optional_tags_may_be_absent_but_not_malformed() -> None:
    fmt = TagsFormat(("question", "answer"), required=("question",))
    assert fmt.read("<question>Q</question>") == Reading("<question>Q</question>", "")
    assert fmt.read("<question>Q</question><answer>") == Reading(
        None, "<answer> is not closed with </answer>"
    )
    assert "(<answer> may be left out)" in fmt.instruction("a question")


def test_tags_format_rejects_bad_declarations() -> None:
    with pytest.raises(ValueError, match="distinct"):
        TagsFormat(("a", "a"))
    with pytest.raises(ValueError, match="not among"):
        TagsFormat(("a", "b"), required=("c",))
    with pytest.raises(ValueError, match="not among"):
        QUESTION_ANSWER.wrap({"score": "1"})


def test_tags_prefix_stops_and_instruction() -> None:
    assert (SUBGOAL_TOOL.prefix, SUBGOAL_TOOL.stops) == ("<subgoal>", ("</tool>",))
    assert SUBGOAL_TOOL.instruction("a plan") == (
        "Reply with a plan, written as <subgoal>...</subgoal> then <tool>...</tool>."
    )


# -- ToolCallFormat ----------------------------------------------------------------------------


def test_tool_call_canonical_content_is_sorted_json() -> None:
    reply = 'Let me look. <tool_call>\n{"name": "get_order", "arguments": {"z": 1, "a": "é"}}\n</tool_call>'
    canonical = '{"arguments": {"a": "é", "z": 1}, "name": "get_order"}'
    assert TOOL_CALL.read(reply) == Reading(canonical, "")
    assert TOOL_CALL.parse(canonical) == ToolCall("get_order", {"z": 1, "a": "é"})
    assert json.loads(canonical) == {"name": "get_order", "arguments": {"a": "é", "z": 1}}


def test_absent_arguments_mean_none_and_last_call_wins() -> None:
    reply = '<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>'
    assert TOOL_CALL.read(reply).content == '{"arguments": {}, "name": "b"}'


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"name": "f"} trailing', "not valid JSON (Extra data"),
        ('{"name": "f",}', "not valid JSON"),
        ("not json", "not valid JSON"),
        (" ", "empty <tool_call></tool_call>"),
        ('[{"name": "f"}]', "must be a JSON object, not an array"),
        ('"f"', "must be a JSON object, not a string"),
        ("null", "must be a JSON object, not null"),
        ('{"arguments": {}}', 'has no "name"'),
        ('{"name": ""}', '"name" must be a non-empty string'),
        ('{"name": 3}', '"name" must be a non-empty string, not a number'),
        ('{"name": ["f"]}', '"name" must be a non-empty string, not an array'),
        (
            '{"name": "f", "arguments": "{\\"x\\": 1}"}',
            '"arguments" must be a JSON object, not a string',
        ),
        ('{"name": "f", "arguments": [1]}', '"arguments" must be a JSON object, not an array'),
        ('{"name": "f", "arguments": null}', '"arguments" must be a JSON object, not null'),
        ('{"name": "f", "id": "1"}', "unexpected keys ['id']"),
        ('{"name": "f", "name": "g"}', "duplicate keys"),
        ('{"name": "f", "arguments": {"x": NaN}}', "NaN is not JSON"),
    ],
)
def test_tool_call_says_why_it_failed(content: str, reason: str) -> None:
    read = TOOL_CALL.read(f"<tool_call>{content}</tool_call>")
    assert read.content is None and reason in read.reason, read


def test_tool_call_unclosed_and_missing() -> None:
    assert TOOL_CALL.read('<tool_call>{"name": "f"}') == Reading(
        None, "<tool_call> is not closed with </tool_call>"
    )
    assert TOOL_CALL.read('{"name": "f"}').reason == "no <tool_call>...</tool_call> in the reply"
    assert (TOOL_CALL.prefix, TOOL_CALL.stops) == ("<tool_call>", ("</tool_call>",))


def test_tool_call_parse_refuses_other_tags() -> None:
    assert TOOL_CALL.parse("<answer>5</answer>") is None
    assert TOOL_CALL.parse("<message>hi</message>") is None  # no message alternative here


def test_message_alternative() -> None:
    fmt = TOOL_CALL_OR_MESSAGE
    assert fmt.read("Sure. <message> Which order? </message>") == Reading(
        "<message>Which order?</message>", ""
    )
    assert fmt.parse("<message>Which order?</message>") == "Which order?"
    # Whichever ends last wins.
    call = '<tool_call>{"name": "f"}</tool_call>'
    assert fmt.read(f"<message>one moment</message>{call}").content == (
        '{"arguments": {}, "name": "f"}'
    )
    assert fmt.read(f"{call}<message>done</message>").content == "<message>done</message>"
    assert fmt.read("<message></message>").reason == "empty <message></message>"
    assert fmt.read(f"<message>x {call}</message>").reason == (
        "<message> must not contain <tool_call> tags"
    )
    assert fmt.read("<message>unclosed").reason == "<message> is not closed with </message>"
    assert fmt.read("hello").reason == (
        "no <tool_call>...</tool_call> or <message>...</message> in the reply"
    )
    assert (fmt.prefix, fmt.stops) == ("", ("</tool_call>", "</message>"))
    assert fmt.parse("<message></message>") is None
    assert fmt.parse("<message>a</message> b") is None
    assert fmt.parse("plain text") is None
    assert fmt.wrap("<message>hi</message>") == "<message>hi</message>"
    assert fmt.wrap('{"name": "f"}') == '<tool_call>{"name": "f"}</tool_call>'


# -- ChoiceFormat (verdict) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("<verdict>STOP</verdict>", Reading("STOP", "")),
        ("<verdict> continue </verdict>", Reading("CONTINUE", "")),
        ("<VERDICT>Stop</VERDICT>", Reading("STOP", "")),
        ("<verdict>STOP</verdict><verdict>CONTINUE</verdict>", Reading("CONTINUE", "")),
        (
            "<verdict>STOP.</verdict>",
            Reading(None, "<verdict> must be one of STOP, CONTINUE, not 'STOP.'"),
        ),
        (
            "<verdict>STOP or CONTINUE</verdict>",
            Reading(None, "<verdict> must be one of STOP, CONTINUE, not 'STOP or CONTINUE'"),
        ),
        ("STOP", Reading(None, "no <verdict>...</verdict> in the reply")),
    ],
)
def test_verdict(text: str, reading: Reading) -> None:
    assert VERDICT.read(text) == reading


def test_choice_instruction_lists_every_choice() -> None:
    three = ChoiceFormat("pick", choices=("A", "B", "C"))
    assert three.instruction("a letter") == (
        "Reply with a letter: <pick>A</pick>, <pick>B</pick>, <pick>C</pick>."
    )
    assert VERDICT.instruction("your verdict") == (
        "Reply with your verdict: <verdict>STOP</verdict> or <verdict>CONTINUE</verdict>."
    )


# -- TextFormat --------------------------------------------------------------------------------


def test_text_format_keeps_the_stop_marker() -> None:
    assert USER_TEXT.read("  I want to return my order.  ") == Reading(
        "I want to return my order.", ""
    )
    assert USER_TEXT.read("Thanks! ###STOP###") == Reading("Thanks! ###STOP###", "")
    # Whatever follows the marker is cut (generation stops there anyway).
    assert USER_TEXT.read("Thanks! ###STOP###\nassistant: ...").content == "Thanks! ###STOP###"
    assert USER_TEXT.read("###STOP###") == Reading("###STOP###", "")
    assert USER_TEXT.read(" \n ") == Reading(None, "empty reply")
    assert USER_TEXT.stops == ("###STOP###",)
    assert TextFormat().stops == () and TextFormat().read("héllo <b>") == Reading("héllo <b>", "")
