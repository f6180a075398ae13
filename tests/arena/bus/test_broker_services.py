"""The services the broker answers itself (arena/bus/broker_services.py), without sockets."""

from __future__ import annotations

from collections import Counter

import pytest

from arena.bus.broker_services import answer_builtin
from arena.bus.codec import Message, decode, encode
from arena.bus.errors import ProtocolError
from arena.bus.registry import ActorInfo, Registry


def message(mtype: str, service: str, body: object = None) -> Message:
    return decode(encode(mtype, body, src="a", service=service)[1])


def registry_with_a() -> Registry:
    registry = Registry()
    info = ActorInfo("a", "test", ["gen"], [], "h", 1, b"a", 0.0, endpoint="ipc:///tmp/a")
    registry.add(info)
    return registry


def test_each_builtin_answers_from_the_registry_and_the_counters() -> None:
    registry, counters = registry_with_a(), Counter({"schema": 2})
    assert answer_builtin(registry, counters, b"a", message("request", "echo", [1, "x"])) == [
        1,
        "x",
    ]
    assert answer_builtin(registry, counters, b"a", message("request", "broker.stats")) == {
        "schema": 2
    }
    listed = answer_builtin(registry, counters, b"a", message("request", "broker.actors"))
    assert [a["name"] for a in listed] == ["a"]
    found = answer_builtin(
        registry, counters, b"a", message("request", "broker.resolve", {"key": "service:gen"})
    )
    assert found == [{"name": "a", "endpoint": "ipc:///tmp/a", "public_key": None}]


@pytest.mark.parametrize(
    ("identity", "msg", "code"),
    [
        (b"a", message("episode", "echo"), "unknown_service"),
        (b"a", message("request", "broker.nothing"), "unknown_service"),
        (b"z", message("request", "broker.resolve", {"key": "service:gen"}), "not_registered"),
        (b"a", message("request", "broker.resolve", {"name": "gen"}), "schema"),
    ],
)
def test_what_the_broker_cannot_answer_is_a_protocol_error(
    identity: bytes, msg: Message, code: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        answer_builtin(registry_with_a(), Counter(), identity, msg)
    assert caught.value.code == code
