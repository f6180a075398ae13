"""An actor whose broker restarts: in one process, with real brokers in threads over ipc://.

A restarted broker knows nobody. What an actor sends it first may be a request rather than a
heartbeat (a request queued while the broker was down is flushed the moment the connection is
back): that request's ``not_registered`` answer must make the actor register again, and fail the
request as lost (``broker_lost``), which its caller may send again. These tests make that order
certain: the actors' own heartbeats are 30 s apart, so none reaches the new broker first.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_restart.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from arena.bus import Actor, Broker, BusError
from arena.bus.codec import decode, encode


class BrokerThread:
    """A broker serving in a thread, stopped (its socket closed) by :meth:`stop`."""

    def __init__(self, address: str, **settings: float) -> None:
        self.broker = Broker(address, **settings)
        self.thread = threading.Thread(target=self.broker.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.broker.stop()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


@pytest.fixture
def address(ipc_dir: str) -> str:
    return f"ipc://{ipc_dir}/bus.sock"


@pytest.fixture
def brokers(address: str) -> Iterator[list[BrokerThread]]:
    """Started brokers, stopped at the end (slow heartbeats: only the test's messages count)."""
    started: list[BrokerThread] = []
    yield started
    for broker in started:
        if broker.thread.is_alive():
            broker.stop()


def slow_broker(address: str) -> BrokerThread:
    return BrokerThread(address, heartbeat_interval=30.0, heartbeat_timeout=60.0)


async def until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def actor_sees_its_broker_go(actor: Actor) -> Callable[[], None]:
    """A wait, to call once the broker is stopped, until the actor's socket has seen its
    connection drop. A request sent before that (a loaded host's I/O thread may take a while to
    read the closed connection) goes out on the dead connection and is lost, which would make
    the request below time out rather than reach the new broker first."""
    sock = actor._broker.sock  # type: ignore[union-attr]
    assert sock is not None
    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)

    def wait() -> None:
        try:
            assert monitor.poll(5000), "the actor never saw its broker go"
            recv_monitor_message(monitor)
        finally:
            sock.disable_monitor()
            monitor.close(linger=0)

    return wait


def test_a_request_that_reaches_a_restarted_broker_first_makes_the_actor_register_again(
    address: str, brokers: list[BrokerThread]
) -> None:
    brokers.append(slow_broker(address))

    async def scenario() -> None:
        actor = Actor("client", address, heartbeat_interval=30.0)
        await actor.start()
        stopped_at = actor_sees_its_broker_go(actor)
        brokers[0].stop()
        stopped_at()
        brokers.append(slow_broker(address))
        # The new broker hears this request before anything else from the actor.
        with pytest.raises(BusError) as lost:
            await actor.request(service="broker.actors", timeout=5.0)
        assert lost.value.code == "broker_lost"
        await until(lambda: actor.broker_sessions == 2)
        listed = await actor.request(service="broker.actors", timeout=5.0)
        assert [a["name"] for a in listed.body] == ["client"]
        assert actor.counters["error:not_registered"] == 1
        await actor.close()

    asyncio.run(scenario())


def test_every_request_from_an_unknown_actor_is_answered(
    address: str, brokers: list[BrokerThread]
) -> None:
    """Not only the first in each heartbeat interval: a requester waits for its answer."""
    brokers.append(slow_broker(address))
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, b"ghost")
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(address)
    try:
        ids = []
        for _ in range(3):
            msg_id, frames = encode("request", None, src="ghost", service="broker.actors")
            sock.send_multipart(frames)
            ids.append(msg_id)
        # A heartbeat right after the first answer: the once-per-interval limit applies to it.
        sock.send_multipart(encode("heartbeat", None, src="ghost")[1])
        answers = [decode(sock.recv_multipart()) for _ in ids]
        assert [(a.type, a.body["code"], a.reply_to) for a in answers] == [
            ("error", "not_registered", i) for i in ids
        ]
        assert not sock.poll(300)  # the heartbeat got no answer of its own
    finally:
        sock.close()
    assert brokers[0].broker.counters["not_registered"] == 4


def test_heartbeats_go_on_when_the_status_cannot_be_read(
    address: str, brokers: list[BrokerThread], caplog: pytest.LogCaptureFixture
) -> None:
    """A status that raised must not end the heartbeats (the broker would declare the actor
    dead, and nothing would say why): they go without it, and the failure is logged once."""
    brokers.append(BrokerThread(address, heartbeat_interval=0.05, heartbeat_timeout=0.5))

    async def scenario() -> None:
        failing = Actor("failing", address, heartbeat_interval=0.05)
        failing.status["broken"] = lambda: 1 / 0
        probe = Actor("probe", address, heartbeat_interval=0.05)
        await failing.start()
        await probe.start()
        await asyncio.sleep(1.0)  # twice the broker's heartbeat timeout
        listed = await probe.request(service="broker.actors", timeout=5.0)
        assert "failing" in [a["name"] for a in listed.body]
        assert failing.counters["status_error"] > 1
        for actor in (probe, failing):
            await actor.close()

    with caplog.at_level(logging.ERROR, logger="arena.bus"):
        asyncio.run(scenario())
    assert caplog.text.count("failing cannot report its status") == 1
    assert "ZeroDivisionError" in caplog.text


def test_a_failed_background_task_is_logged(
    address: str, brokers: list[BrokerThread], caplog: pytest.LogCaptureFixture
) -> None:
    brokers.append(slow_broker(address))

    async def broken() -> None:
        raise RuntimeError("lost in the background")

    async def scenario() -> None:
        actor = Actor("client", address, heartbeat_interval=30.0)
        await actor.start()
        actor._spawn(broken())
        await until(lambda: actor.counters["task_error"] == 1)
        await actor.close()

    with caplog.at_level(logging.ERROR, logger="arena.bus"):
        asyncio.run(scenario())
    assert "lost in the background" in caplog.text
