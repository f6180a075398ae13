"""games/retail/tasks.py: tasks drawn from a seed, their answer keys, and the replayed hash.

Run with `.venv/bin/python -m pytest -q tests/games/retail/test_tasks.py`.
"""

from __future__ import annotations

import json

import pytest

from games.retail.db import generate, money
from games.retail.tasks import KINDS, expected_hash, replay, sample_task
from games.tools import call_json


def test_the_same_seed_gives_the_same_task_and_kinds_are_all_drawn() -> None:
    assert sample_task(3) == sample_task(3)
    kinds = {sample_task(seed).kind for seed in range(40)}
    assert kinds == set(KINDS)
    assert {sample_task(seed, ["return"]).kind for seed in range(10)} == {"return"}
    with pytest.raises(ValueError, match="task kinds must be a non-empty subset"):
        sample_task(0, ["refund"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_task_is_consistent_with_its_database(kind: str) -> None:
    for seed in range(6):
        task = sample_task(seed, [kind])
        db = generate(seed)
        find, *change = [json.loads(a) for a in task.actions]
        email = find["arguments"]["email"]
        (user,) = [u for u in db.users.values() if u.email == email]
        assert find == {"name": "find_user", "arguments": {"email": email}}
        facts = {f.key: f.text for f in task.facts}
        assert facts["name"] == f"My name is {user.name}."
        assert facts["email"] == f"My email is {user.email}."
        assert task.request and task.goal not in task.request
        if kind == "user_address":
            assert change[0]["arguments"]["user_id"] == user.user_id
            assert set(facts) == {"name", "email", "address"}
            continue
        order = db.orders[facts["order"].removeprefix("The order id is ").rstrip(".")]
        assert order.user_id == user.user_id
        if kind == "cancel":
            assert order.status == "pending" and task.outputs == (money(order.total),)
        elif kind == "return":
            ids = change[0]["arguments"]["item_ids"]
            assert order.status == "delivered"
            assert task.outputs == (money(sum(i.price for i in order.items if i.item_id in ids)),)
        elif kind == "order_total":
            assert change == [] and task.outputs == (money(order.total),)
        else:
            assert order.status == "pending" and task.outputs == ()


def test_a_cancel_task_by_hand() -> None:
    task = sample_task(3, ["cancel"])
    db = generate(3)
    order_id = json.loads(task.actions[1])["arguments"]["order_id"]
    order = db.orders[order_id]
    reason = json.loads(task.actions[1])["arguments"]["reason"]
    said = {"no longer needed": "I no longer need it.", "ordered by mistake": "I ordered it by "}
    assert [f.key for f in task.facts] == ["name", "email", "order", "reason"]
    assert task.facts[3].text.startswith(said[reason])
    assert task.facts[3].keywords == ("reason", "why")
    assert task.outputs == (money(order.total),)
    assert task.done_markers == ("cancelled",)
    assert task.task_id == "cancel-3"


def test_expected_hash_replays_the_ground_truth() -> None:
    for seed in range(5):
        task = sample_task(seed)
        assert expected_hash(task, seed) == expected_hash(task, seed)
        fresh = generate(seed).state_hash()
        if task.kind == "order_total":
            assert expected_hash(task, seed) == fresh  # a question changes nothing
        else:
            assert expected_hash(task, seed) != fresh


def test_a_different_action_gives_a_different_hash() -> None:
    task = sample_task(3, ["cancel"])
    find, cancel = task.actions
    args = json.loads(cancel)["arguments"]
    other = next(r for r in ("no longer needed", "ordered by mistake") if r != args["reason"])
    wrong = call_json("cancel_order", order_id=args["order_id"], reason=other)
    assert replay([find, wrong], 3).state_hash() != expected_hash(task, 3)
    # the order of reads does not matter; the changes do
    read = call_json("get_order", order_id=args["order_id"])
    assert replay([find, read, cancel, read], 3).state_hash() == expected_hash(task, 3)


def test_replay_refuses_a_failing_action() -> None:
    with pytest.raises(ValueError, match="identify the customer with find_user first"):
        replay([call_json("get_order", order_id="#W1")], 0)
