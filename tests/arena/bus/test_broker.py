"""The broker and actors in real processes over real ipc:// and tcp:// sockets.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_broker.py``.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time

import msgpack
import pytest
import zmq

from arena.bus import BlockingActor, BusError, encode
from tests.arena.bus.conftest import spawn, stop, wait_for_service


def test_request_reply_through_broker_to_actor_process(broker: str, echo_actor) -> None:
    with BlockingActor("client", broker) as client:
        assert client.call({"hello": [1, 2]}, service="test.echo") == {"hello": [1, 2]}
        reply = client.request(b"direct", dst="echo-1", service="test.echo").result(5)
        assert reply.body == b"direct" and reply.src == "echo-1"


def test_load_is_balanced_across_actors_of_one_service(broker: str, echo_actor) -> None:
    second = spawn(
        "-m",
        "arena",
        "echo",
        broker,
        "--name",
        "echo-2",
        "--service",
        "test.echo",
        "--heartbeat-interval",
        "0.2",
    )
    try:
        deadline = time.monotonic() + 20
        with BlockingActor("client", broker) as client:
            # both echo actors registered: the event itself (counting actors waited the whole
            # deadline once the spawn's readiness probe had left)
            while time.monotonic() < deadline and not {"echo-1", "echo-2"} <= {
                a["name"] for a in client.call(service="broker.actors")
            }:
                time.sleep(0.05)
            futures = [client.request(i, service="test.echo") for i in range(40)]
            answered_by = {f.result(10).src for f in futures}
        assert answered_by == {"echo-1", "echo-2"}
    finally:
        stop(second)


def test_publish_reaches_subscribers_only(broker: str) -> None:
    received: list[object] = []
    got = threading.Event()

    def on_news(msg) -> None:
        received.append(msg.body)
        got.set()

    listener = BlockingActor("listener", broker, topics=())
    listener.actor.subscribe("news.", on_news)
    with (
        listener,
        BlockingActor("deaf", broker) as deaf,
        BlockingActor("speaker", broker) as speaker,
    ):
        deaf.actor.on("control", lambda m: received.append(("deaf", m.body)))
        speaker.publish("news.sports", {"score": 3})
        assert got.wait(5)
        time.sleep(0.2)
    assert received == [{"score": 3}]


def test_unknown_service_and_actor_are_clear_errors(broker: str) -> None:
    with BlockingActor("client", broker) as client:
        with pytest.raises(BusError) as err:
            client.call(service="no.such.service", timeout=5)
        assert err.value.code == "unknown_service"
        with pytest.raises(BusError) as err:
            client.call(dst="nobody", service="x", timeout=5)
        assert err.value.code == "unknown_actor"


def test_sigkill_actor_fails_pending_request_and_notifies(broker: str, echo_actor) -> None:
    deaths: list[dict] = []
    notified = threading.Event()
    watcher = BlockingActor("watcher", broker)
    watcher.actor.subscribe("actor.dead", lambda m: (deaths.append(m.body), notified.set()))
    # Brokered: this is the broker's death notice at work (the direct path's own detection is
    # tests/arena/bus/test_direct.py's); peer to peer, the client would notice first.
    with watcher, BlockingActor("client", broker, routing="brokered") as client:
        assert client.call(1, service="test.echo") == 1
        echo_actor.send_signal(signal.SIGKILL)
        echo_actor.wait()
        start = time.monotonic()
        pending = client.request("lost", service="test.echo", timeout=30)
        with pytest.raises(BusError) as err:
            pending.result(15)
        elapsed = time.monotonic() - start
        assert err.value.code == "actor_dead", err.value
        # heartbeat timeout is 1 s, checked every 0.2 s: well under 3 s, never the 30 s timeout
        assert elapsed < 3.0, elapsed
        assert notified.wait(5)
    assert [d["name"] for d in deaths] == ["echo-1"]
    assert len(deaths[0]["requests"]) == 1


def test_request_timeout_is_a_clear_error_not_a_hang(broker: str) -> None:
    stopped = spawn(
        "-m",
        "arena",
        "echo",
        broker,
        "--name",
        "sleepy",
        "--service",
        "test.sleepy",
        "--heartbeat-interval",
        "0.2",
    )
    try:
        wait_for_service(broker, "test.sleepy")
        stopped.send_signal(signal.SIGSTOP)  # alive for a moment, but never answers
        with BlockingActor("client", broker) as client:
            start = time.monotonic()
            with pytest.raises(BusError) as err:
                client.call(service="test.sleepy", timeout=0.3)
            assert err.value.code in ("timeout", "actor_dead")
            assert time.monotonic() - start < 2.0
    finally:
        stopped.send_signal(signal.SIGCONT)
        stop(stopped)


# -- bad input from a raw pyzmq socket -------------------------------------------------------


class Raw:
    """A bare DEALER that speaks the wire format by hand."""

    def __init__(self, address: str, name: str = "raw") -> None:
        self.name = name
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.ROUTING_ID, name.encode())
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)

    def send(self, *frames: bytes) -> None:
        self.sock.send_multipart(list(frames))

    def message(self, mtype: str, body=None, **route) -> list[bytes]:
        return [bytes(f) for f in encode(mtype, body, src=self.name, **route)[1]]

    def header(self, mtype: str = "request", **changes) -> bytes:
        header = msgpack.unpackb(self.message(mtype, None, service="test.echo")[0])
        header.update(changes)
        return msgpack.packb(header)

    def recv(self, timeout: float = 5.0) -> tuple[dict, object]:
        """The next message that is not one of the broker's heartbeats (which may come at any
        moment between a request and its answer)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0 and self.sock.poll(int(left * 1000)), "no reply from the broker"
            header = msgpack.unpackb(self.sock.recv_multipart()[0])
            if header["type"] != "heartbeat":
                return header, msgpack.unpackb(header["body"])

    def register(self) -> None:
        self.send(
            *self.message(
                "register",
                {
                    "name": self.name,
                    "kind": "raw",
                    "services": [],
                    "topics": [],
                    "host": "h",
                    "pid": os.getpid(),
                },
                service="broker",
            )
        )
        header, body = self.recv()
        assert header["type"] == "reply" and body["ok"] is True

    def close(self) -> None:
        self.sock.close()


BAD_INPUTS = {
    "garbage": lambda raw: [b"\xc1\xc1 not msgpack at all"],
    "truncated": lambda raw: [raw.message("request", "x" * 50, service="test.echo")[0][:30]],
    "header_not_a_map": lambda raw: [msgpack.packb([1, 2, 3])],
    "unknown_type": lambda raw: [raw.header(type="bogus")],
    "wrong_version": lambda raw: [raw.header(v=99)],
    "oversize": lambda raw: [raw.header(), b"\0" * (1 << 20) + b"\0" * 1024],
    "unknown_service": lambda raw: raw.message("request", 1, service="nope"),
    "reply_to_unknown_request": lambda raw: raw.message("reply", 1, dst="client", reply_to="f00"),
}
EXPECTED_CODE = {
    "garbage": "malformed",
    "truncated": "malformed",
    "header_not_a_map": "malformed",
    "unknown_type": "unknown_type",
    "wrong_version": "bad_version",
    "oversize": "too_large",
    "unknown_service": "unknown_service",
    "reply_to_unknown_request": "unknown_request",
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gets_error_reply_and_broker_keeps_serving(
    broker: str, echo_actor, case: str
) -> None:
    raw = Raw(broker)
    try:
        raw.register()
        raw.send(*BAD_INPUTS[case](raw))
        header, body = raw.recv()
        assert header["type"] == "error"
        assert body["code"] == EXPECTED_CODE[case], body
        with BlockingActor("client", broker) as client:
            stats = client.call(service="broker.stats")
            assert stats[EXPECTED_CODE[case]] == 1
            assert client.call("still alive", service="test.echo") == "still alive"
    finally:
        raw.close()


def test_unregistered_sender_is_told_to_register(broker: str) -> None:
    raw = Raw(broker, name="stranger")
    try:
        raw.send(*raw.message("request", 1, service="echo"))
        header, body = raw.recv()
        assert (header["type"], body["code"]) == ("error", "not_registered")
    finally:
        raw.close()


def test_malformed_body_reaches_actor_which_answers_with_error(broker: str, echo_actor) -> None:
    raw = Raw(broker)
    try:
        raw.register()
        raw.send(raw.header(body=b"\xc1"))
        header, body = raw.recv()
        assert header["type"] == "error" and header["src"] == "echo-1"
        assert body["code"] == "malformed"
        with BlockingActor("client", broker) as client:
            assert client.call(7, service="test.echo") == 7
    finally:
        raw.close()


# -- command line ------------------------------------------------------------------------------


def test_arena_ping_exit_codes(broker: str, tmp_path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "arena", "ping", broker, "-n", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "2 round trips" in ok.stdout
    dead = subprocess.run(
        [sys.executable, "-m", "arena", "ping", f"ipc://{tmp_path}/none", "--timeout", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dead.returncode == 1
    assert "no broker" in dead.stderr


def test_pipelined_requests_from_threads(broker: str, echo_actor) -> None:
    with BlockingActor("client", broker) as client:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda i: client.call(i, service="test.echo"), range(200)))
    assert results == list(range(200))
