"""A scripted support agent for the retail game: the reference the agent seat is measured by.

It reads only what the agent seat sees (the user's messages, its own calls and the tools'
output) and follows the store policy step by step: learn the request's kind from the opening
message (cancel, return, address of an order or of the account, an order's total), ask for the
email, identify the user, ask for the order id and read the order, ask for what the change needs
(reason, items, new address), make the change, and tell the user the tool's answer (which holds
the refund or the new address). It understands the phrasings of the scripted user
(``simulators.scripted_user``) and of users who write alike ("My email is ...", "The new
address is ..."); an LLM user who phrases things otherwise may leave it asking again.

It plays the ``agent`` seat only; the user seat is a simulator's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from games.bots.base import Bot, unsupported
from games.interaction import Post
from games.retail.game import AGENT, MESSAGE_CLOSE, MESSAGE_OPEN, TOOLS, USER, RetailSupport
from games.text_env import TextGame
from games.tools import call_json

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
NAME = re.compile(r"my name is ([A-Z][\w'-]+(?: [A-Z][\w'-]+)+)")
ORDER = re.compile(r"#W\d+")
ADDRESS = re.compile(r"new address is (.+?\d{5})")
ANYTHING_ELSE = "Is there anything else I can help you with?"
WRITES = ("cancel_order", "return_items", "change_order_address", "change_user_address")


def message(text: str) -> str:
    return f"{MESSAGE_OPEN}{text}{MESSAGE_CLOSE}"


def intent(request: str) -> str | None:
    """The kind of task an opening message asks for, or None."""
    text = request.lower()
    if "cancel" in text:
        return "cancel"
    if "return" in text:
        return "return"
    if "address" in text:
        return "user_address" if "account" in text or "moved" in text else "order_address"
    if any(w in text for w in ("how much", "total", "pay")):
        return "order_total"
    return None


@dataclass
class Call:
    name: str
    arguments: dict
    ok: bool
    output: str


@dataclass
class Conversation:
    """What the agent seat has seen, read back from its posts."""

    user: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    @classmethod
    def read(cls, posts: Sequence[Post]) -> Conversation:
        seen = cls()
        pending: dict | None = None
        for post in posts:
            if post.sender == USER and post.field == "message":
                seen.user.append(post.text)
            elif post.sender == AGENT and post.field == "message":
                seen.said.append(post.text)
            elif post.sender == AGENT and post.field == "tool_call":
                try:
                    pending = json.loads(post.text)
                except ValueError:
                    pending = None
                pending = pending if isinstance(pending, dict) else {}
            elif post.sender == TOOLS and pending is not None:
                args = pending.get("arguments")
                call = Call(
                    str(pending.get("name")),
                    args if isinstance(args, dict) else {},
                    ok=not post.text.startswith("Error:"),
                    output=post.text,
                )
                seen.calls.append(call)
                pending = None
        return seen

    def last(self, pattern: re.Pattern[str], group: int = 0) -> str | None:
        found = [m.group(group) for text in self.user for m in pattern.finditer(text)]
        return found[-1] if found else None

    def result(self, name: str, **arguments: object) -> Call | None:
        """The last call of ``name`` whose arguments include ``arguments``."""
        for call in reversed(self.calls):
            if call.name == name and all(call.arguments.get(k) == v for k, v in arguments.items()):
                return call
        return None


def next_action(posts: Sequence[Post]) -> str:
    """The agent's next action (canonical text) given the posts it has seen."""
    seen = Conversation.read(posts)
    kind = intent(seen.user[0]) if seen.user else None
    if kind is None:
        return message("How can I help you today?")
    writes = [call for call in seen.calls if call.name in WRITES]
    if writes:  # one change per task: report it (or the refusal) once, then wrap up
        last = writes[-1]
        if last.ok:
            report = f"Done. {last.output}"
        else:
            report = f"Sorry, I could not do that: {last.output.removeprefix('Error: ')}"
        return message(ANYTHING_ELSE if report in seen.said else report)
    user_id, action = _identify(seen)
    if user_id is None:
        return action
    said = " ".join(seen.user)
    if kind == "user_address":
        address = seen.last(ADDRESS, 1)
        if address is None:
            return message("What is the new address for your account?")
        return call_json("change_user_address", user_id=user_id, address=address)
    order_id = seen.last(ORDER)
    if order_id is None:
        return message("Which order is it about? Please give me the order id.")
    order = seen.result("get_order", order_id=order_id)
    if order is None:
        return call_json("get_order", order_id=order_id)
    if not order.ok:
        return message(f"Sorry, I could not find order {order_id}. Could you check the order id?")
    if kind == "order_total":
        total = re.search(r"Total: (\$\d+\.\d\d)", order.output)
        return message(
            f"The total of order {order_id} is {total.group(1) if total else 'unknown'}."
        )
    if kind == "cancel":
        reason = "no longer needed" if "no longer need" in said.lower() else None
        reason = "ordered by mistake" if "mistake" in said.lower() else reason
        if reason is None:
            return message("What is the reason for the cancellation?")
        return call_json("cancel_order", order_id=order_id, reason=reason)
    if kind == "return":
        items = re.findall(r"^- (I\d+) (.+?) \$", order.output, flags=re.MULTILINE)
        chosen = [item_id for item_id, product in items if product.lower() in said.lower()]
        if not chosen:
            return message("Which item would you like to return?")
        return call_json("return_items", order_id=order_id, item_ids=chosen)
    address = seen.last(ADDRESS, 1)
    if address is None:
        return message("What is the new shipping address for this order?")
    return call_json("change_order_address", order_id=order_id, address=address)


def _identify(seen: Conversation) -> tuple[str | None, str]:
    """The identified user's id, or None and the action that identifies them."""
    for call in reversed(seen.calls):
        if call.name == "find_user" and call.ok:
            found = re.search(r"Found user (U\d+)", call.output)
            if found:
                return found.group(1), ""
    email, name = seen.last(EMAIL), seen.last(NAME, 1)
    if email is not None and seen.result("find_user", email=email) is None:
        return None, call_json("find_user", email=email)
    if name is not None and seen.result("find_user", name=name) is None:
        return None, call_json("find_user", name=name)
    if email is not None or name is not None:
        return None, message("Sorry, I could not find your account. Could you check your email?")
    return None, message("Could you please tell me your email so I can find your account?")


class RetailAgentBot(Bot):
    """The scripted support agent; see the module docstring."""

    def act(self, env: TextGame, agent: str) -> str:
        if not isinstance(env, RetailSupport) or agent != AGENT:
            raise unsupported(self, env, "the agent seat of the retail game")
        return next_action(env.visible_posts(agent))
