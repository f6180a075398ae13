"""Retail customer support: an agent with database tools serves a customer (after MUA-RL and
tau2-bench).

Seats: 2. user (the customer) speaks first; agent (the store's support agent) answers.

The user wants one thing: cancel an order, return items, change an order's or the account's
address, or learn an order's total. The user opens with the request and gives details (name,
email, order id, reason, items, new address) only when asked.

On each turn the agent does exactly one of two things:
- call one tool: {"name": TOOL, "arguments": {...}} in <tool_call></tool_call>. The tool's
  output, or its error, is shown to the agent only, and the agent moves again. A failed call
  (unknown tool, bad JSON, missing or mistyped arguments, a request the policy refuses) is not
  a lost turn: read the error and try again.
- write one message to the user in <message></message>. The user then replies.

Store policy (the tools enforce it): identify the user with find_user first; only that user's
account and orders may be read or changed. Only pending orders can be cancelled (reason "no
longer needed" or "ordered by mistake") or have their shipping address changed; only delivered
orders take returns, by item id. Tell the user the outcome, with any refund or total exactly as
the tool printed it (e.g. $34.00).

The user never sees tool calls or their output. The conversation ends when the user writes
###STOP### (done, or given up), or after the turn limit.

Reward (agent): 1 if, at the end, the database is exactly as the user's request requires
(nothing else changed) and the agent's messages stated what the user had to hear (a refund
amount, a total), else 0. The user's seat earns 0.

Malformed turns (retried with feedback, then forfeited): a reply with no letter or digit; for
the agent, a reply that is neither a tool call (a JSON object) nor a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
from gymnasium import spaces

from games.formats import STOP_MARKER, TOOL_CALL_OR_MESSAGE, TagFormat
from games.retail.db import generate
from games.retail.tasks import KINDS, Task, expected_hash, sample_task
from games.text import CHARSET, normalize
from games.text_env import TextGame
from games.tools import call_json

USER, AGENT, TOOLS = "user", "agent", "tools"
MESSAGE_OPEN, MESSAGE_CLOSE = "<message>", "</message>"
_CALL_TAG = TagFormat("tool_call")
_IDS = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "order": re.compile(r"#W\d+"),
    "user": re.compile(r"\bU\d{4}\b"),
    "item": re.compile(r"\bI\d{4}\b"),
}


class RetailSupport(TextGame):
    """A support agent with tools over an in-memory store, and a customer with a hidden goal."""

    metadata = {
        **TextGame.metadata,
        "name": "retail_v0",
        "kind": "cooperative",
        "information": "hidden",
        "max_turns": 40,
        "strongest_bot": "retail-agent-v0",
        "simulator": "scripted-user-v0",
        "pass_metrics": ("success", "db_match", "outputs_ok"),
    }

    def __init__(self, kinds: Sequence[str] = KINDS, **kwargs: Any) -> None:
        action_space = spaces.Text(2000, min_length=1, charset=CHARSET)
        box = spaces.Box(0, 1, (3,), np.float32)
        super().__init__(2, action_space, box, agents=(USER, AGENT), **kwargs)
        self.kinds = tuple(kinds)
        sample_task(0, self.kinds)  # a bad kind fails here, not at the first reset
        self.toolbox = generate(0).toolbox()  # parse_action works before the first reset

    # -- who sees what -------------------------------------------------------------------------
    def interaction_graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_node(
            USER,
            role="simulated-user-v0",
            simulatable=True,
            never_sees=frozenset({"tool_call", "tool_result"}),
        )
        graph.add_node(AGENT, role="executor-v0", role_kwargs={"allow_message": True})
        graph.add_node(TOOLS)
        graph.add_edge(USER, AGENT, sees=frozenset({"message"}))
        graph.add_edge(AGENT, USER, sees=frozenset({"message"}))
        graph.add_edge(TOOLS, AGENT, sees=frozenset({"tool_result"}))
        return graph

    def simulator_context(self, agent: str) -> dict[str, Any]:
        if agent != USER:
            return {}
        task = self.task
        return {
            "task_id": task.task_id,
            "request": task.request,
            "goal": task.goal,
            "persona": task.persona,
            "facts": [f.text for f in task.facts],
            "fact_keywords": [list(f.keywords) for f in task.facts],
            "done_markers": list(task.done_markers),
            "stop": STOP_MARKER,
            "instructions": f"Open with your request only, e.g. {task.request!r}.",
        }

    def private_info(self, agent: str) -> list[str]:
        return [self.task.goal, self.task.persona] if agent == USER else []

    def rules(self, agent: str | None = None) -> str:
        text = super().rules(agent)
        if agent == USER:
            return text
        return f"{text}\n\nTools:\n{self.toolbox.describe()}"

    # -- the game ------------------------------------------------------------------------------
    def _new_game(self, rng: np.random.Generator) -> None:
        self.task_seed = int(rng.integers(0, 2**31 - 1))
        self.task: Task = sample_task(self.task_seed, self.kinds)
        self.db = generate(self.task_seed)
        self.toolbox = self.db.toolbox()
        self.expected = expected_hash(self.task, self.task_seed)
        self._next = USER
        self._stopped = False
        self._verdict: dict[str, float] | None = None
        self.tool_calls = 0
        self.tool_errors = 0

    def _current_agent(self) -> str:
        return self._next

    def _legal_actions(self, agent: str) -> list[str]:
        """Sample actions for random play, written so that upper-casing them changes nothing
        the game reads (the conformance kit checks that): facts and questions in capitals, ids
        the agent has seen, and two calls that fail."""
        if agent == USER:
            return [
                "I NEED HELP WITH AN ORDER.",
                *(fact.text.upper() for fact in self.task.facts if fact.key != "address"),
                STOP_MARKER,
            ]
        seen = " ".join(p.text for p in self.visible_posts(AGENT))
        found = {key: sorted(set(pattern.findall(seen))) for key, pattern in _IDS.items()}
        actions = [
            f"{MESSAGE_OPEN}HOW CAN I HELP YOU?{MESSAGE_CLOSE}",
            f"{MESSAGE_OPEN}PLEASE TELL ME YOUR EMAIL AND THE ORDER ID.{MESSAGE_CLOSE}",
            call_json("list_orders"),
            call_json("refund_everything", order_id="#W0000000"),
        ]
        actions += [call_json("find_user", email=e.upper()) for e in found["email"]]
        for uid in found["user"]:
            actions += [call_json("get_user", user_id=uid), call_json("list_orders", user_id=uid)]
        for oid in found["order"]:
            actions += [
                call_json("get_order", order_id=oid),
                call_json("cancel_order", order_id=oid, reason="NO LONGER NEEDED"),
                *(call_json("return_items", order_id=oid, item_ids=[i]) for i in found["item"]),
            ]
        return actions

    def _is_legal(self, agent: str, action: Any) -> bool:
        return True  # every well-formed action is playable; a bad tool call fails as a tool

    def parse_action(self, agent: str, text: str) -> str | None:
        """User: the text (cut after ###STOP###), if it has a letter or digit. Agent:
        ``<message>text</message>``, or a tool call attempt (text starting with ``{``, bare or
        in ``<tool_call>``) in canonical form."""
        if not isinstance(text, str) or not text.strip():
            return None
        text = text.strip()
        if agent == USER:
            if not re.search(r"\w", text):
                return None  # says nothing: no letter or digit
            if STOP_MARKER in text:
                text = text[: text.index(STOP_MARKER) + len(STOP_MARKER)]
            return text
        lowered = text.lower()
        if lowered.startswith(MESSAGE_OPEN):
            return TOOL_CALL_OR_MESSAGE.read(text).content
        if lowered.startswith("<tool_call>"):
            match = _CALL_TAG.last(text)
            if match is None:
                return None
            text = match.group(1).strip()
        return self.toolbox.canonical(text) if text.startswith("{") else None

    def _apply(self, agent: str, action: str) -> Mapping[str, float]:
        if agent == USER:
            self._post(USER, "message", action)
            self._stopped = STOP_MARKER in action
            self._next = AGENT
        elif action.startswith(MESSAGE_OPEN):
            self.infos[AGENT].pop("tool_error", None)
            self._post(AGENT, "message", action[len(MESSAGE_OPEN) : -len(MESSAGE_CLOSE)])
            self._next = USER
        else:
            self.infos[AGENT].pop("tool_error", None)
            self._post(AGENT, "tool_call", action)
            result = self.toolbox.call(action)
            self._post(TOOLS, "tool_result", result.text)
            self.tool_calls += 1
            if not result.ok:
                self.tool_errors += 1
                self.infos[AGENT]["tool_error"] = result.error
        if self._stopped or self.turn + 1 >= self.max_turns:
            return self._evaluate()
        return {}

    def _outcome(self) -> str | None:
        return "user_stop" if self._stopped else None

    def _finish(self, reason: str, truncated: bool = False) -> None:
        if self._verdict is None:  # a forfeit ends the game outside _apply
            self._evaluate()
        super()._finish(reason, truncated)

    def _evaluate(self) -> dict[str, float]:
        """Score the conversation (once): the rewards, and ``success``, ``db_match``,
        ``outputs_ok`` and ``metrics`` in every seat's infos."""
        db_match = self.db.state_hash() == self.expected
        said = normalize(" ".join(self.agent_messages()))
        outputs_ok = all(normalize(out) in said for out in self.task.outputs)
        success = db_match and outputs_ok
        metrics = {
            "success": float(success),
            "db_match": float(db_match),
            "outputs_ok": float(outputs_ok),
            "tool_calls": float(self.tool_calls),
            "tool_errors": float(self.tool_errors),
        }
        for seat in self.possible_agents:
            self.infos[seat].update(
                success=success, db_match=db_match, outputs_ok=outputs_ok, metrics=dict(metrics)
            )
        self._verdict = {AGENT: float(success), USER: 0.0}
        return self._verdict

    def agent_messages(self) -> list[str]:
        """What the agent said to the user, in order."""
        return [p.text for p in self.posts if p.sender == AGENT and p.field == "message"]

    # -- what each seat reads ------------------------------------------------------------------
    def _observation_array(self, agent: str) -> np.ndarray:
        calls = min(self.tool_calls, self.max_turns) / self.max_turns
        return np.array([self.turn / self.max_turns, calls, float(self._stopped)], np.float32)

    def _describe(self, agent: str) -> str:
        turn = f"Turn {min(self.turn + 1, self.max_turns)} of {self.max_turns}."
        if agent == AGENT:
            return (
                f"You are the store's support agent. {turn} Call one tool, or write one message "
                "to the customer (who sees only your messages)."
            )
        task = self.task
        return "\n".join(
            [
                f"You are the customer. {turn}",
                f"Your goal (the agent does not know it): {task.goal}",
                f"Your persona: {task.persona}",
                "What you know, to tell only when asked:",
                *(f"- {fact.text}" for fact in task.facts),
                f'Open with your request only (e.g. "{task.request}"). When it is done, or '
                f"cannot be done, end your message with {STOP_MARKER}.",
            ]
        )
