"""Actor internals that the process-level tests cannot isolate: in one process, over inproc://.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_actor.py``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import zmq

from arena.bus import Actor, Broker, BusError, BusTimeout


@pytest.fixture
def inproc_broker() -> Iterator[tuple[zmq.Context, str]]:
    ctx = zmq.Context()
    # Slow heartbeats: no message but the test's own may wake an actor up.
    broker = Broker(
        "inproc://bus-test", context=ctx, heartbeat_interval=30.0, heartbeat_timeout=60.0
    )
    thread = threading.Thread(target=broker.serve_forever, daemon=True)
    thread.start()
    yield ctx, "inproc://bus-test"
    broker.stop()
    thread.join(timeout=5)
    ctx.term()


def test_failure_mid_drain_does_not_strand_queued_messages(inproc_broker) -> None:
    ctx, address = inproc_broker

    async def scenario() -> tuple[list[object], dict[str, int]]:
        echo = Actor(
            "echo",
            address,
            context=ctx,
            heartbeat_interval=30.0,
            services={"echo": lambda m: m.body},
            routing="brokered",
        )
        client = Actor("client", address, context=ctx, heartbeat_interval=30.0, routing="brokered")
        await echo.start()
        await client.start()
        channel = echo._broker
        assert channel is not None
        dispatch, seen = channel.on_frames, []

        def flaky(frames: list[object]) -> None:
            seen.append(frames)
            if len(seen) == 1:
                raise RuntimeError("first message fails outside any handler")
            dispatch(frames)

        channel.on_frames = flaky
        futures = [client.request(i, service="echo", timeout=1.0) for i in range(20)]
        results = await asyncio.gather(*futures, return_exceptions=True)
        await client.close()
        await echo.close()
        return [r if isinstance(r, Exception) else r.body for r in results], echo.counters

    results, counters = asyncio.run(scenario())
    assert isinstance(results[0], BusTimeout)  # the one that failed; every other is answered
    assert results[1:] == list(range(1, 20))
    assert counters["dispatch_error"] == 1


def test_many_in_flight_with_arrays_are_all_answered(inproc_broker) -> None:
    ctx, address = inproc_broker

    async def scenario() -> None:
        echo = Actor("echo", address, context=ctx, services={"echo": lambda m: m.body})
        client = Actor("client", address, context=ctx)
        await echo.start()
        await client.start()
        ids = [np.arange(i, dtype=np.int32) for i in range(300)]
        replies = await asyncio.gather(*(client.request({"ids": a}, service="echo") for a in ids))
        for sent, reply in zip(ids, replies, strict=True):
            np.testing.assert_array_equal(reply.body["ids"], sent)
        await client.close()
        await echo.close()

    asyncio.run(scenario())


def test_a_handlers_os_error_keeps_its_path_in_the_error_reply(inproc_broker) -> None:
    # repr(OSError(30, ..., path)) drops the path: a learner whose run directory turned
    # read-only answered "OSError(30, 'Read-only file system')", naming no directory.
    ctx, address = inproc_broker

    def save(msg: object) -> None:
        raise OSError(30, "Read-only file system", "/runs/a/checkpoints/.tmp-step-3")

    def other(msg: object) -> None:
        raise RuntimeError("boom")

    async def scenario() -> list[str]:
        server = Actor(
            "server",
            address,
            context=ctx,
            heartbeat_interval=30.0,
            services={"save": save, "other": other},
        )
        client = Actor("client", address, context=ctx, heartbeat_interval=30.0)
        await server.start()
        await client.start()
        said = []
        try:
            for service in ("save", "other"):
                with pytest.raises(BusError) as info:
                    await client.request({}, service=service, timeout=5.0)
                assert info.value.code == "handler_error"
                said.append(info.value.message)
        finally:
            await client.close()
            await server.close()
        return said

    assert asyncio.run(scenario()) == [
        "OSError: [Errno 30] Read-only file system: '/runs/a/checkpoints/.tmp-step-3'",
        "RuntimeError('boom')",
    ]


def test_registering_waits_out_a_connection_that_is_not_there_yet(inproc_broker) -> None:
    """A DEALER with no connection to queue on refuses a send at once: so it was when the broker
    had just refused its keys and it had not reconnected yet, and ``start`` failed with "busy:
    send queue full" in the middle of a timeout meant for "no broker". It now retries until its
    timeout, registers once a send goes out, and says ``no_broker`` if none does."""
    ctx, address = inproc_broker

    def refusing(actor: Actor, times: int) -> list[int]:
        sent = actor.send_to_broker
        refused = []

        def send(frames: list) -> None:
            if len(refused) < times:
                refused.append(1)
                raise BusError("busy", "send queue of late is full")
            sent(frames)

        actor.send_to_broker = send  # type: ignore[method-assign]
        return refused

    async def scenario() -> None:
        late = Actor("late", address, context=ctx, heartbeat_interval=30.0)
        refused = refusing(late, 3)
        await late.start(timeout=5.0)
        assert len(refused) == 3 and late.broker_up and not late._pending
        await late.close()
        never = Actor("never", address, context=ctx, heartbeat_interval=30.0)
        refusing(never, 1_000_000)
        with pytest.raises(BusError) as info:
            await never.start(timeout=0.3)
        assert info.value.code == "no_broker" and not never._pending

    asyncio.run(scenario())
