"""A small in-memory retail database and its operations, the tools of the support agent.

Users have an id (``U1042``), a name, an email and an address; orders (``#W1234567``) belong to
one user, list items (``I0042``: a product name and a price) and have a status:

- ``pending``: may be cancelled, or have its shipping address changed;
- ``delivered``: items may be returned (each item once);
- ``cancelled``, ``returned``: final.

Money is kept in whole cents and printed as ``$12.50``. Every change goes through a method that
checks the store's policy and raises :class:`RetailError` (a :class:`~games.tools.ToolError`, so
the agent reads the message as the tool's output) when the request breaks it. The support agent
must first identify the customer (:meth:`RetailDB.find_user`); every other operation works only
on that customer's account and orders.

:meth:`RetailDB.state_hash` is the SHA-256 of the canonical JSON of the stored state (users and
orders, not who is logged in): two databases hash alike exactly when a customer would see no
difference. :func:`generate` builds a database from a seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field

from games.tools import Tool, Toolbox, ToolError

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
STATUSES = ("pending", "delivered", "cancelled", "returned")

FIRST_NAMES = (
    "Mia", "Noah", "Olivia", "Liam", "Ava", "Ethan", "Sofia", "Lucas", "Emma", "Mason",
    "Yusuf", "Aisha", "Chen", "Priya", "Omar", "Lena",
)  # fmt: skip
LAST_NAMES = (
    "Garcia", "Smith", "Nguyen", "Kowalski", "Silva", "Johnson", "Patel", "Kim", "Rossi",
    "Brown", "Haddad", "Okafor",
)  # fmt: skip
STREETS = (
    "Oak Street", "Maple Avenue", "Pine Road", "Cedar Lane", "Elm Drive", "Birch Court",
    "Willow Way", "Lakeview Boulevard", "Hillcrest Road", "River Street",
)  # fmt: skip
CITIES = (
    ("Springfield", "IL"), ("Portland", "OR"), ("Austin", "TX"), ("Denver", "CO"),
    ("Madison", "WI"), ("Raleigh", "NC"), ("Tucson", "AZ"), ("Boise", "ID"),
)  # fmt: skip
CATALOG = (
    ("desk lamp", 3400), ("blue mug", 1100), ("yoga mat", 2599), ("water bottle", 1850),
    ("wireless mouse", 2999), ("phone case", 1499), ("hiking boots", 12900),
    ("rain jacket", 8950), ("coffee grinder", 4575), ("bluetooth speaker", 5999),
    ("throw pillow", 2250), ("notebook set", 1275), ("tea kettle", 3890), ("backpack", 6400),
    ("sunglasses", 7499), ("board game", 3125),
)  # fmt: skip
"""Product name and price in cents."""


class RetailError(ToolError):
    """A request the store's policy refuses, or that names nothing in the database."""


def money(cents: int) -> str:
    """``1250`` -> ``"$12.50"``."""
    return f"${cents // 100}.{cents % 100:02d}"


def clean_address(text: str) -> str:
    """An address with its spacing normalized: one address, one spelling."""
    return " ".join(text.split()).strip(" .")


@dataclass
class User:
    user_id: str
    name: str
    email: str
    address: str


@dataclass
class Item:
    item_id: str
    product: str
    price: int
    """In cents."""


@dataclass
class Order:
    order_id: str
    user_id: str
    items: list[Item]
    status: str
    address: str
    cancel_reason: str = ""
    returned: list[str] = field(default_factory=list)
    """Item ids returned."""
    refund: int = 0
    """Cents refunded so far."""

    @property
    def total(self) -> int:
        return sum(item.price for item in self.items)


class RetailDB:
    """Users and orders, with the operations a support agent may perform."""

    def __init__(self, users: list[User], orders: list[Order]) -> None:
        self.users = {u.user_id: u for u in users}
        self.orders = {o.order_id: o for o in orders}
        self.verified: str | None = None
        """The user identified in this conversation (session state, not hashed)."""

    # -- state -------------------------------------------------------------------------------
    def state(self) -> dict:
        """Everything stored, as plain JSON-ready data."""
        return {
            "users": [asdict(u) for u in sorted(self.users.values(), key=lambda u: u.user_id)],
            "orders": [asdict(o) for o in sorted(self.orders.values(), key=lambda o: o.order_id)],
        }

    def state_hash(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`state`."""
        text = json.dumps(self.state(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    # -- lookups -----------------------------------------------------------------------------
    def _user(self, user_id: str) -> User:
        self._need_verified()
        if user_id != self.verified:
            raise RetailError(
                f"user {user_id!r} is not the customer identified in this conversation "
                f"({self.verified})"
            )
        return self.users[user_id]

    def _order(self, order_id: str) -> Order:
        self._need_verified()
        key = order_id.strip().upper()
        if not key.startswith("#"):
            key = "#" + key
        order = self.orders.get(key)
        if order is None or order.user_id != self.verified:
            raise RetailError(f"the identified customer has no order {order_id!r}")
        return order

    def _need_verified(self) -> None:
        if self.verified is None:
            raise RetailError("identify the customer with find_user first")

    # -- reads -------------------------------------------------------------------------------
    def find_user(self, name: str = "", email: str = "") -> str:
        """Identify the customer by email, or by full name."""
        name, email = " ".join(name.split()).casefold(), email.strip().casefold()
        if not name and not email:
            raise RetailError("give the customer's email or full name")
        for user in self.users.values():
            if (not email or user.email == email) and (not name or user.name.casefold() == name):
                self.verified = user.user_id
                return f"Found user {user.user_id}: {user.name}, {user.email}. Identified."
        raise RetailError("no user matches that " + ("email" if email else "name"))

    def get_user(self, user_id: str) -> str:
        user = self._user(user_id)
        orders = ", ".join(o.order_id for o in self.orders.values() if o.user_id == user_id)
        return (
            f"User {user.user_id}: {user.name}, email {user.email}, address {user.address}. "
            f"Orders: {orders or 'none'}."
        )

    def list_orders(self, user_id: str) -> str:
        self._user(user_id)
        orders = [o for o in self.orders.values() if o.user_id == user_id]
        return "; ".join(f"{o.order_id} ({o.status}, {money(o.total)})" for o in orders)

    def get_order(self, order_id: str) -> str:
        order = self._order(order_id)
        lines = [
            f"Order {order.order_id}: status {order.status}, ship to {order.address}.",
            *(
                f"- {i.item_id} {i.product} {money(i.price)}"
                + (" (returned)" if i.item_id in order.returned else "")
                for i in order.items
            ),
            f"Total: {money(order.total)}.",
        ]
        if order.refund:
            lines.append(f"Refunded: {money(order.refund)}.")
        return "\n".join(lines)

    # -- changes -----------------------------------------------------------------------------
    def cancel_order(self, order_id: str, reason: str) -> str:
        order = self._order(order_id)
        if order.status != "pending":
            raise RetailError(
                f"order {order.order_id} is {order.status}; only pending orders can be cancelled"
            )
        reason = " ".join(reason.split()).casefold()
        if reason not in CANCEL_REASONS:
            raise RetailError(f"reason must be one of {', '.join(map(repr, CANCEL_REASONS))}")
        order.status, order.cancel_reason, order.refund = "cancelled", reason, order.total
        return (
            f"Order {order.order_id} is now cancelled. Refund of {money(order.total)} "
            "to the original payment method."
        )

    def return_items(self, order_id: str, item_ids: list[str]) -> str:
        order = self._order(order_id)
        if order.status != "delivered":
            raise RetailError(
                f"order {order.order_id} is {order.status}; only delivered orders take returns"
            )
        ids = [i.strip().upper() for i in item_ids]
        if not ids:
            raise RetailError("name at least one item id to return")
        if len(set(ids)) != len(ids):
            raise RetailError("an item id is listed twice")
        items = {i.item_id: i for i in order.items}
        strangers = [i for i in ids if i not in items]
        if strangers:
            raise RetailError(
                f"order {order.order_id} has no item {', '.join(strangers)}; "
                f"its items are {', '.join(items)}"
            )
        refund = sum(items[i].price for i in ids)
        order.status, order.returned, order.refund = "returned", sorted(ids), refund
        names = ", ".join(f"{items[i].product} ({i})" for i in ids)
        return (
            f"Order {order.order_id}: returned {names}. Refund of {money(refund)} "
            "to the original payment method."
        )

    def change_order_address(self, order_id: str, address: str) -> str:
        order = self._order(order_id)
        if order.status != "pending":
            raise RetailError(
                f"order {order.order_id} is {order.status}; "
                "only a pending order's address can change"
            )
        order.address = _new_address(address)
        return f"Order {order.order_id} will now ship to {order.address}: address updated."

    def change_user_address(self, user_id: str, address: str) -> str:
        user = self._user(user_id)
        user.address = _new_address(address)
        return f"User {user.user_id}'s address updated to {user.address}."

    def toolbox(self) -> Toolbox:
        """The operations as the agent's tools."""
        return Toolbox(
            [
                Tool(
                    "find_user",
                    "Identify the customer by email or full name (needed before any other tool).",
                    {"email": str, "name": str},
                    self.find_user,
                    optional=frozenset({"email", "name"}),
                ),
                Tool(
                    "get_user",
                    "The customer's details and order ids.",
                    {"user_id": str},
                    self.get_user,
                ),
                Tool(
                    "list_orders",
                    "The customer's orders with status and total.",
                    {"user_id": str},
                    self.list_orders,
                ),
                Tool(
                    "get_order",
                    "An order's status, address, items (ids, prices) and total.",
                    {"order_id": str},
                    self.get_order,
                ),
                Tool(
                    "cancel_order",
                    "Cancel a pending order; reason is 'no longer needed' or 'ordered by mistake'.",
                    {"order_id": str, "reason": str},
                    self.cancel_order,
                ),
                Tool(
                    "return_items",
                    "Return items (by item id) of a delivered order; refunds their price.",
                    {"order_id": str, "item_ids": list[str]},
                    self.return_items,
                ),
                Tool(
                    "change_order_address",
                    "Change the shipping address of a pending order.",
                    {"order_id": str, "address": str},
                    self.change_order_address,
                ),
                Tool(
                    "change_user_address",
                    "Change the address on the customer's account.",
                    {"user_id": str, "address": str},
                    self.change_user_address,
                ),
            ]
        )


def _new_address(address: str) -> str:
    address = clean_address(address)
    if len(address) < 8:
        raise RetailError(f"{address!r} is not a full address (street, city, state and zip)")
    return address


def random_address(rng: random.Random) -> str:
    city, state = rng.choice(CITIES)
    return (
        f"{rng.randint(2, 998)} {rng.choice(STREETS)}, {city}, {state} {rng.randint(10000, 99999)}"
    )


def generate(seed: int, users: int = 8) -> RetailDB:
    """A database of ``users`` customers, each with a pending and a delivered order and up to
    two more; the same seed gives the same database."""
    rng = random.Random(seed)
    names = rng.sample([(f, last) for f in FIRST_NAMES for last in LAST_NAMES], users)
    user_ids = rng.sample(range(1000, 10000), users)
    order_ids = iter(rng.sample(range(1_000_000, 10_000_000), users * 4))
    item_ids = iter(rng.sample(range(1000, 10000), users * 4 * 3))
    people, orders = [], []
    for (first, last), uid in zip(names, user_ids, strict=True):
        user = User(
            f"U{uid}",
            f"{first} {last}",
            f"{first}.{last}{rng.randint(1, 99)}@example.com".lower(),
            random_address(rng),
        )
        people.append(user)
        statuses = ["pending", "delivered"] + rng.choices(STATUSES[:3], k=rng.randint(0, 2))
        for status in statuses:
            products = rng.sample(CATALOG, rng.randint(1, 3))
            items = [Item(f"I{next(item_ids)}", name, price) for name, price in products]
            address = user.address if rng.random() < 0.8 else random_address(rng)
            order = Order(f"#W{next(order_ids)}", user.user_id, items, status, address)
            if status == "cancelled":
                order.cancel_reason, order.refund = rng.choice(CANCEL_REASONS), order.total
            orders.append(order)
    return RetailDB(people, orders)
