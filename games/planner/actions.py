"""What the seats of Planner, executor and verifier write, read into canonical actions.

A plan is ``<subgoal>s</subgoal>\\n<tool>t</tool>`` (:func:`plan_text`), a call is a JSON object
with a ``"name"`` (:func:`canonical_call`), a verdict is ``STOP`` or ``CONTINUE``.
:func:`read_action` turns a seat's reply into that canonical text, or None when it is malformed;
whether a readable action is also legal (a known tool, a short subgoal) is the game's to say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from games.formats import SUBGOAL_TOOL, VERDICT
from games.text import normalize

ACTION_MAX_CHARS = 2000


def plan_text(subgoal: str, tool: str) -> str:
    """The canonical plan: ``<subgoal>s</subgoal>\\n<tool>t</tool>`` (content case-folded)."""
    return SUBGOAL_TOOL.wrap({"subgoal": normalize(subgoal), "tool": normalize(tool)})


def canonical_call(obj: Mapping[str, Any]) -> str:
    """A call object as the game's canonical text: keys, the tool name and string arguments
    case-folded (with spacing collapsed), keys sorted. Case never changes what a tool does here
    (numbers, BM25 queries and answers are all read without case)."""
    folded = {str(k).casefold(): v for k, v in obj.items()}
    folded["name"] = normalize(str(folded.get("name", "")))
    args = folded.setdefault("arguments", {})
    if isinstance(args, dict):
        folded["arguments"] = {
            str(k).casefold(): normalize(v) if isinstance(v, str) else v for k, v in args.items()
        }
    return json.dumps(folded, sort_keys=True, ensure_ascii=False)


def read_action(agent: str, text: str) -> str | None:
    """The canonical action of ``agent`` (``planner``, ``executor`` or ``verifier``) that
    ``text`` stands for, or None when it is malformed: a plan without both tags, a call that is
    not a JSON object with a non-empty string ``"name"``, a verdict other than STOP or CONTINUE
    (alone or in ``<verdict>`` tags)."""
    if not isinstance(text, str) or len(text) > ACTION_MAX_CHARS:
        return None
    if agent == "planner":
        fields = SUBGOAL_TOOL.fields(text)
        return None if fields is None else plan_text(fields["subgoal"], fields["tool"])
    if agent == "verifier":
        word = normalize(text).upper()
        return word if word in VERDICT.choices else VERDICT.extract(text)
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    name = next((v for k, v in obj.items() if str(k).casefold() == "name"), None)
    if not isinstance(name, str) or not name.strip():
        return None
    return canonical_call(obj)
