"""Customer tasks for the retail game: what the user wants, what they know, and the right answer.

A :class:`Task` is drawn from a seed together with the database (:func:`sample_task` and
:func:`games.retail.db.generate` take the same seed). It holds

- the user's side: the opening ``request`` (no details), the hidden ``goal``, a ``persona``
  (a sentence of style), and the ``facts`` the user reveals when asked (each with the words in
  the agent's message that count as asking for it);
- the answer key: ``actions``, the tool calls that solve the task (canonical JSON), and
  ``outputs``, the strings the agent's messages must contain (a refund amount, an order total).

:func:`expected_hash` replays ``actions`` on a fresh database: the agent succeeds when its
database ends with that hash and it said every output. Reads change nothing, so ``actions``
lists the identification (``find_user``) and the change, and the agent may read as it likes.

Kinds: ``cancel`` (a pending order, with a reason), ``return`` (items of a delivered order),
``order_address`` (a pending order's shipping address), ``user_address`` (the account's
address), ``order_total`` (a question: nothing changes, the total must be said).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from games.retail.db import RetailDB, generate, money, random_address
from games.tools import call_json

KINDS = ("cancel", "return", "order_address", "user_address", "order_total")

FACT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "email": ("email", "e-mail", "identify", "identity", "verify"),
    "order": ("order id", "order number", "which order", "order"),
    "reason": ("reason", "why"),
    "item": ("item", "product", "which one"),
    "address": ("address",),
}
"""Words in the agent's message that ask for each kind of fact (lower case)."""

PERSONAS = (
    "You are polite and brief.",
    "You are in a hurry and a little impatient.",
    "You are friendly and chatty, but you stay on topic.",
    "You are careful and want to be sure things are done right.",
    "You are not good with computers and write in short, simple sentences.",
)

REQUESTS: dict[str, tuple[str, ...]] = {
    "cancel": ("Hi, I'd like to cancel an order.", "Hello, I need to cancel one of my orders."),
    "return": ("Hi, I want to return something I bought.", "Hello, I'd like to make a return."),
    "order_address": (
        "Hi, I need to change the shipping address of an order.",
        "Hello, one of my orders should go to a different address.",
    ),
    "user_address": (
        "Hi, I moved and need to update the address on my account.",
        "Hello, please change the address on my account.",
    ),
    "order_total": (
        "Hi, how much did I pay for one of my orders?",
        "Hello, I'd like to know the total of an order.",
    ),
}
DONE_MARKERS: dict[str, tuple[str, ...]] = {
    "cancel": ("cancelled",),
    "return": ("returned",),
    "order_address": ("updated",),
    "user_address": ("updated",),
    "order_total": ("total",),
}
"""Words in the agent's message that tell a scripted user its request was handled."""
REASON_TEXTS = {
    "no longer needed": ("I no longer need it.", "you no longer need it"),
    "ordered by mistake": ("I ordered it by mistake.", "you ordered it by mistake"),
}
"""Cancel reason -> (what the user says, how the goal says it)."""


@dataclass(frozen=True)
class Fact:
    """One thing the user knows and says when asked."""

    key: str
    """``name``, ``email``, ``order``, ``reason``, ``item`` or ``address``."""
    text: str
    """What the user says to reveal it."""
    keywords: tuple[str, ...]
    """Words in the agent's message that ask for it."""


@dataclass(frozen=True)
class Task:
    """A customer's goal and its answer key."""

    task_id: str
    kind: str
    request: str
    """The opening message: the kind of help wanted, no details."""
    goal: str
    """The full goal, hidden from the agent."""
    persona: str
    facts: tuple[Fact, ...]
    actions: tuple[str, ...]
    """Ground-truth tool calls, canonical JSON, in order."""
    outputs: tuple[str, ...]
    """Strings the agent's messages must contain."""
    done_markers: tuple[str, ...]


def _fact(key: str, text: str) -> Fact:
    return Fact(key, text, FACT_KEYWORDS[key])


def sample_task(seed: int, kinds: Sequence[str] = KINDS) -> Task:
    """The task of the game seeded ``seed`` (its database is ``generate(seed)``)."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        raise ValueError(f"task kinds must be a non-empty subset of {KINDS}, got {list(kinds)}")
    rng = random.Random(f"retail-task:{seed}")
    db = generate(seed)
    kind = rng.choice(list(kinds))
    user = rng.choice(sorted(db.users.values(), key=lambda u: u.user_id))
    mine = [o for o in db.orders.values() if o.user_id == user.user_id]
    wanted = {"cancel": "pending", "order_address": "pending", "return": "delivered"}
    order = rng.choice(
        [o for o in mine if o.status == wanted[kind]]
        if kind in wanted
        else [o for o in mine if o.status != "cancelled"]
    )
    identify = call_json("find_user", email=user.email)
    facts = [
        _fact("name", f"My name is {user.name}."),
        _fact("email", f"My email is {user.email}."),
    ]
    if kind != "user_address":
        facts.append(_fact("order", f"The order id is {order.order_id}."))
    oid = order.order_id
    if kind == "cancel":
        reason = rng.choice(sorted(REASON_TEXTS))
        said, why = REASON_TEXTS[reason]
        facts.append(_fact("reason", said))
        goal = f"You want your pending order {oid} cancelled because {why}, and to know the refund."
        action = call_json("cancel_order", order_id=oid, reason=reason)
        outputs = (money(order.total),)
    elif kind == "return":
        items = rng.sample(order.items, rng.randint(1, min(2, len(order.items))))
        items.sort(key=order.items.index)
        names = " and the ".join(i.product for i in items)
        facts.append(_fact("item", f"I want to return the {names}."))
        goal = (
            f"You want to return the {names} from your delivered order {oid}, and to know the "
            "refund."
        )
        action = call_json("return_items", order_id=oid, item_ids=[i.item_id for i in items])
        outputs = (money(sum(i.price for i in items)),)
    elif kind in ("order_address", "user_address"):
        address = random_address(rng)
        while address in (user.address, order.address):
            address = random_address(rng)
        facts.append(_fact("address", f"The new address is {address}."))
        if kind == "order_address":
            goal = f"You want your pending order {oid} shipped to {address} instead."
            action = call_json("change_order_address", order_id=oid, address=address)
        else:
            goal = f"You moved: you want your account's address changed to {address}."
            action = call_json("change_user_address", user_id=user.user_id, address=address)
        outputs = ()
    else:
        goal = f"You want to know the total you paid for order {oid}."
        action, outputs = None, (money(order.total),)
    return Task(
        task_id=f"{kind}-{seed}",
        kind=kind,
        request=rng.choice(REQUESTS[kind]),
        goal=goal,
        persona=rng.choice(PERSONAS),
        facts=tuple(facts),
        actions=(identify,) if action is None else (identify, action),
        outputs=outputs,
        done_markers=DONE_MARKERS[kind],
    )


def replay(actions: Sequence[str], seed: int) -> RetailDB:
    """A fresh database for ``seed`` after ``actions``; a failing action raises ValueError."""
    db = generate(seed)
    box = db.toolbox()
    for action in actions:
        result = box.call(action)
        if not result.ok:
            raise ValueError(f"replaying {action} failed: {result.error}")
    return db


def expected_hash(task: Task, seed: int) -> str:
    """The database hash after the task's ground-truth actions on a fresh database."""
    return replay(task.actions, seed).state_hash()
