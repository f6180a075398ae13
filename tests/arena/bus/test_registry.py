"""The broker's bookkeeping, without sockets: service picks, the directory and its watchers.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_registry.py``.
"""

from __future__ import annotations

import pytest

from arena.bus.errors import ProtocolError
from arena.bus.registry import ActorInfo, Registry, actor_from_register


def actor(name: str, services: tuple[str, ...] = (), endpoint: str | None = None) -> ActorInfo:
    return ActorInfo(
        name=name,
        kind="test",
        services=list(services),
        topics=[],
        host="h",
        pid=1,
        identity=name.encode(),
        last_seen=0.0,
        endpoint=endpoint,
    )


def test_pick_takes_the_least_loaded_and_rotates_ties() -> None:
    registry = Registry()
    a, b, c = (actor(n, ("gen",)) for n in "abc")
    for x in (a, b, c):
        registry.add(x)
    assert registry.pick("nothing") is None
    a.outstanding.add(("r", "1"))
    # b and c tie at 0 outstanding: they alternate, a (1 outstanding) is never picked
    picks = [registry.pick("gen").name for _ in range(4)]
    assert sorted(picks) == ["b", "b", "c", "c"] and picks[0] != picks[1]
    registry.remove(b)
    assert registry.pick("gen") is c
    assert registry.by_identity == {b"a": a, b"c": c}


def test_the_directory_lists_instances_with_an_endpoint() -> None:
    registry = Registry()
    registry.add(actor("inf-0", ("policy:main",), endpoint="ipc:///x/inf-0"))
    registry.add(actor("inf-1", ("policy:main",)))  # no endpoint: reachable via the broker only
    assert registry.instances("service:policy:main") == [
        {"name": "inf-0", "endpoint": "ipc:///x/inf-0", "public_key": None}
    ]
    assert registry.instances("name:inf-1") == []
    assert registry.instances("name:nobody") == []
    assert registry.instances("bogus") is None


def test_watchers_are_told_of_changes_but_not_the_actor_itself() -> None:
    registry = Registry()
    client, other = actor("client"), actor("other")
    server = actor("server", ("svc",), endpoint="ipc:///s")
    for x in (client, other, server):
        registry.add(x)
    assert registry.resolve(client, "service:svc") == [server.instance()]
    assert registry.resolve(server, "service:svc") == [server.instance()]
    assert registry.resolve(other, "name:server") == [server.instance()]
    assert registry.resolve(client, 42) is None  # not a key: nothing watched
    registry.remove(server)
    told = sorted((w.name, body["key"], body["instances"]) for w, body in registry.changes(server))
    assert told == [("client", "service:svc", []), ("other", "name:server", [])]
    # a watcher that left is dropped, not told
    registry.remove(other)
    assert [w.name for w, _ in registry.changes(server)] == ["client"]


REGISTER = {
    "name": "a",
    "kind": "rollout",
    "services": ["gen"],
    "topics": ["actor."],
    "host": "h",
    "pid": 7,
    "endpoint": "ipc:///tmp/a.sock",
    "public_key": None,
}


def test_a_register_body_becomes_an_actor_or_a_clear_protocol_error() -> None:
    info = actor_from_register(b"a", REGISTER, 12.5)
    assert (info.name, info.kind, info.services, info.topics, info.pid) == (
        "a",
        "rollout",
        ["gen"],
        ["actor."],
        7,
    )
    assert (info.identity, info.last_seen, info.endpoint, info.public_key) == (
        b"a",
        12.5,
        "ipc:///tmp/a.sock",
        None,
    )
    with pytest.raises(ProtocolError, match="actor name must equal its routing id"):
        actor_from_register(b"b", REGISTER, 0.0)
    with pytest.raises(ProtocolError, match="expected a string or nil, got int"):
        actor_from_register(b"a", {**REGISTER, "endpoint": 5}, 0.0)


def test_routed_requests_are_forgotten_when_answered_or_expired() -> None:
    registry = Registry()
    target = actor("t", ("gen",))
    registry.add(target)
    for key, when in ((("r", "1"), 0.0), (("r", "2"), 8.0)):
        registry.pending[key] = ("t", when)
        target.outstanding.add(key)
    assert registry.answered(("r", "1")) and not registry.answered(("r", "1"))
    registry.expire(now=9.0, ttl=2.0)  # ("r", "2") is 1 s old: kept
    assert target.outstanding == {("r", "2")}
    registry.expire(now=10.5, ttl=2.0)
    assert target.outstanding == set() and registry.pending == {}


def test_an_unknown_sender_is_reminded_at_most_once_an_interval_unless_it_asks() -> None:
    registry = Registry()
    assert registry.remind(b"x", 10.0, 1.0, "heartbeat")
    assert not registry.remind(b"x", 10.5, 1.0, "episode")
    assert registry.remind(b"x", 10.6, 1.0, "request")  # a request always gets its answer
    assert registry.remind(b"x", 11.7, 1.0, "heartbeat")
