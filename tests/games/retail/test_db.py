"""games/retail/db.py: the store's operations, its policy errors, the state hash and the seeded
generator, on a small database written out by hand.

Run with `.venv/bin/python -m pytest -q tests/games/retail/test_db.py`.
"""

from __future__ import annotations

import hashlib

import pytest

from games.retail.db import Item, Order, RetailDB, RetailError, User, generate, money
from games.tools import call_json


def small_db() -> RetailDB:
    ann = User("U1001", "Ann Lee", "ann.lee@example.com", "1 Oak Street, Austin, TX 73301")
    bob = User("U1002", "Bob Ray", "bob.ray@example.com", "2 Elm Drive, Boise, ID 83701")
    return RetailDB(
        [ann, bob],
        [
            Order(
                "#W1000001",
                "U1001",
                [Item("I0001", "desk lamp", 3400), Item("I0002", "blue mug", 1100)],
                "pending",
                ann.address,
            ),
            Order(
                "#W1000002",
                "U1001",
                [Item("I0003", "yoga mat", 2599), Item("I0004", "backpack", 6400)],
                "delivered",
                ann.address,
            ),
            Order(
                "#W1000003", "U1002", [Item("I0005", "tea kettle", 3890)], "pending", bob.address
            ),
        ],
    )


def test_money_prints_cents_as_dollars() -> None:
    assert [money(c) for c in (0, 5, 1250, 3400, 12900)] == [
        "$0.00",
        "$0.05",
        "$12.50",
        "$34.00",
        "$129.00",
    ]


def test_state_hash_is_sha256_of_the_canonical_json() -> None:
    db = RetailDB(
        [User("U1", "A B", "a@b.c", "1 X Street")],
        [Order("#W1", "U1", [Item("I1", "mug", 100)], "pending", "1 X Street")],
    )
    canonical = (
        '{"orders":[{"address":"1 X Street","cancel_reason":"","items":[{"item_id":"I1",'
        '"price":100,"product":"mug"}],"order_id":"#W1","refund":0,"returned":[],'
        '"status":"pending","user_id":"U1"}],"users":[{"address":"1 X Street","email":"a@b.c",'
        '"name":"A B","user_id":"U1"}]}'
    )
    assert db.state_hash() == hashlib.sha256(canonical.encode()).hexdigest()


def test_nothing_is_shown_or_changed_before_the_user_is_identified() -> None:
    db = small_db()
    before = db.state_hash()
    with pytest.raises(RetailError, match="identify the customer with find_user first"):
        db.get_order("#W1000001")
    with pytest.raises(RetailError, match="identify the customer with find_user first"):
        db.cancel_order("#W1000001", "no longer needed")
    assert db.state_hash() == before


def test_find_user_by_email_or_full_name() -> None:
    db = small_db()
    assert db.find_user(email=" Ann.Lee@Example.com ") == (
        "Found user U1001: Ann Lee, ann.lee@example.com. Identified."
    )
    assert db.verified == "U1001"
    assert db.find_user(name="bob  ray").startswith("Found user U1002")
    assert db.verified == "U1002"
    with pytest.raises(RetailError, match="no user matches that email"):
        db.find_user(email="nobody@example.com")
    with pytest.raises(RetailError, match="give the customer's email or full name"):
        db.find_user()
    # identifying is session state: it changes no stored data
    assert db.state_hash() == small_db().state_hash()


def test_reads_show_only_the_identified_users_data() -> None:
    db = small_db()
    db.find_user(email="ann.lee@example.com")
    assert db.get_order("#W1000001") == (
        "Order #W1000001: status pending, ship to 1 Oak Street, Austin, TX 73301.\n"
        "- I0001 desk lamp $34.00\n"
        "- I0002 blue mug $11.00\n"
        "Total: $45.00."
    )
    assert db.list_orders("U1001") == "#W1000001 (pending, $45.00); #W1000002 (delivered, $89.99)"
    assert db.get_user("U1001") == (
        "User U1001: Ann Lee, email ann.lee@example.com, address 1 Oak Street, Austin, TX 73301. "
        "Orders: #W1000001, #W1000002."
    )
    with pytest.raises(RetailError, match="the identified customer has no order '#W1000003'"):
        db.get_order("#W1000003")  # Bob's
    with pytest.raises(RetailError, match="'U1002' is not the customer identified"):
        db.get_user("U1002")
    # an order id without '#' or in lower case is the same order
    assert db.get_order("w1000001").startswith("Order #W1000001")


def test_cancel_a_pending_order_refunds_its_total() -> None:
    db = small_db()
    db.find_user(email="ann.lee@example.com")
    with pytest.raises(RetailError, match="reason must be one of 'no longer needed'"):
        db.cancel_order("#W1000001", "too expensive")
    assert db.cancel_order("#W1000001", "Ordered by  mistake") == (
        "Order #W1000001 is now cancelled. Refund of $45.00 to the original payment method."
    )
    order = db.orders["#W1000001"]
    assert (order.status, order.cancel_reason, order.refund) == (
        "cancelled",
        "ordered by mistake",
        4500,
    )
    with pytest.raises(RetailError, match="is cancelled; only pending orders can be cancelled"):
        db.cancel_order("#W1000001", "no longer needed")
    with pytest.raises(RetailError, match="is delivered; only pending orders can be cancelled"):
        db.cancel_order("#W1000002", "no longer needed")


def test_return_items_of_a_delivered_order() -> None:
    db = small_db()
    db.find_user(email="ann.lee@example.com")
    before = db.state_hash()
    with pytest.raises(RetailError, match="is pending; only delivered orders take returns"):
        db.return_items("#W1000001", ["I0001"])
    with pytest.raises(RetailError, match="has no item I0001; its items are I0003, I0004"):
        db.return_items("#W1000002", ["I0001"])
    with pytest.raises(RetailError, match="an item id is listed twice"):
        db.return_items("#W1000002", ["I0003", "i0003"])
    with pytest.raises(RetailError, match="name at least one item id"):
        db.return_items("#W1000002", [])
    assert db.state_hash() == before  # a refused request changes nothing
    assert db.return_items("#W1000002", ["I0004", "I0003"]) == (
        "Order #W1000002: returned backpack (I0004), yoga mat (I0003). Refund of $89.99 to the "
        "original payment method."
    )
    order = db.orders["#W1000002"]
    assert (order.status, order.returned, order.refund) == ("returned", ["I0003", "I0004"], 8999)
    assert "- I0003 yoga mat $25.99 (returned)" in db.get_order("#W1000002")


def test_address_changes() -> None:
    db = small_db()
    db.find_user(email="ann.lee@example.com")
    assert db.change_order_address("#W1000001", " 9 Pine Road,  Denver, CO 80201. ") == (
        "Order #W1000001 will now ship to 9 Pine Road, Denver, CO 80201: address updated."
    )
    assert db.orders["#W1000001"].address == "9 Pine Road, Denver, CO 80201"
    with pytest.raises(RetailError, match="only a pending order's address can change"):
        db.change_order_address("#W1000002", "9 Pine Road, Denver, CO 80201")
    with pytest.raises(RetailError, match="is not a full address"):
        db.change_user_address("U1001", "Denver")
    assert db.change_user_address("U1001", "9 Pine Road, Denver, CO 80201") == (
        "User U1001's address updated to 9 Pine Road, Denver, CO 80201."
    )
    assert db.users["U1001"].address == "9 Pine Road, Denver, CO 80201"
    assert db.users["U1002"].address == "2 Elm Drive, Boise, ID 83701"


def test_the_toolbox_turns_policy_errors_into_tool_errors() -> None:
    db = small_db()
    box = db.toolbox()
    assert box.names == [
        "find_user",
        "get_user",
        "list_orders",
        "get_order",
        "cancel_order",
        "return_items",
        "change_order_address",
        "change_user_address",
    ]
    refused = box.call(call_json("get_order", order_id="#W1000001"))
    assert (refused.ok, refused.text) == (
        False,
        "Error: identify the customer with find_user first",
    )
    assert box.call(call_json("find_user", email="ann.lee@example.com")).ok
    done = box.call(call_json("return_items", order_id="#W1000002", item_ids=["I0003"]))
    assert done.ok and "Refund of $25.99" in done.output


def test_generate_is_seeded_and_gives_every_user_a_pending_and_a_delivered_order() -> None:
    one, two, other = generate(7), generate(7), generate(8)
    assert one.state_hash() == two.state_hash()
    assert one.state_hash() != other.state_hash()
    assert len(one.users) == 8
    for user_id in one.users:
        statuses = [o.status for o in one.orders.values() if o.user_id == user_id]
        assert "pending" in statuses and "delivered" in statuses
        assert 2 <= len(statuses) <= 4
    items = [i.item_id for o in one.orders.values() for i in o.items]
    assert len(items) == len(set(items))
    emails = [u.email for u in one.users.values()]
    assert len(emails) == len(set(emails))
    for order in one.orders.values():
        products = [i.product for i in order.items]
        assert len(products) == len(set(products))  # "return the lamp" names one item
