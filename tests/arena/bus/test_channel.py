"""The asyncio reader of a ZeroMQ socket (:class:`arena.bus.channel.Channel`), over inproc://.

ZeroMQ's descriptor is edge-triggered and a send can consume the edge. These tests take the
descriptor's signal away entirely (as a swallowed edge would) and check that a send made
outside a drain still gets queued input delivered. Run with
``.venv/bin/python -m pytest -q tests/arena/bus/test_channel.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from arena.bus.channel import Channel


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket, zmq.Socket]]:
    """A ROUTER (the test's side) and a DEALER (the channel's), connected and introduced."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind("inproc://channel-test")
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"dealer")
    dealer.connect("inproc://channel-test")
    yield router, dealer
    router.close(linger=0)
    dealer.close(linger=0)
    ctx.term()


async def _open(dealer: zmq.Socket, router: zmq.Socket, on_frames: Any) -> tuple[Channel, bytes]:
    """A channel on ``dealer`` whose descriptor nobody watches, introduced to ``router``, with
    nothing pending on the loop: from here on only a send's check can deliver input."""
    loop = asyncio.get_running_loop()
    channel = Channel(dealer, on_frames, loop, "test")
    loop.remove_reader(channel._fd)  # a swallowed edge, for good
    channel.send([b"hello"])
    assert router.poll(5000)
    identity, _ = router.recv_multipart()
    for _ in range(100):  # the start-up drain and the hello's check run, and find nothing
        if not (channel.scheduled or channel.checking):
            return channel, identity
        await asyncio.sleep(0)
    raise AssertionError("the channel's own callbacks never ran")


def _wait_queued(sock: zmq.Socket) -> None:
    """Block (bounded) until a message is queued on ``sock``."""
    deadline = time.monotonic() + 5.0
    while not sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
        assert time.monotonic() < deadline, "the message never arrived"


def test_a_send_outside_a_drain_delivers_input_the_descriptor_did_not_signal(pair) -> None:
    router, dealer = pair

    async def scenario() -> list[list[Any]]:
        loop = asyncio.get_running_loop()
        received: list[list[Any]] = []
        arrived = loop.create_future()

        def on_frames(frames: list[Any]) -> None:
            received.append(frames)
            if frames[0] == b"reply" and not arrived.done():
                arrived.set_result(None)

        channel, identity = await _open(dealer, router, on_frames)
        # No await from here to the send: the loop cannot run anything in between.
        router.send_multipart([identity, b"reply", b"binary"])
        _wait_queued(dealer)
        channel.send([b"after"])  # outside a drain: it must leave a check for input behind
        await asyncio.wait_for(arrived, 5.0)
        channel.close()
        return received

    received = asyncio.run(scenario())
    assert len(received) == 1
    first, rest = received[0][0], received[0][1:]
    assert first == b"reply" and type(first) is bytes  # the first frame comes as bytes
    assert [type(f) for f in rest] == [zmq.Frame] and rest[0].bytes == b"binary"


def test_a_burst_is_delivered_whole_and_in_order(pair) -> None:
    router, dealer = pair

    async def scenario() -> list[bytes]:
        loop = asyncio.get_running_loop()
        received: list[bytes] = []
        done = loop.create_future()
        channel, identity = await _open(dealer, router, lambda frames: None)

        def on_frames(frames: list[Any]) -> None:
            received.append(frames[0])
            if len(received) == 500 and not done.done():
                done.set_result(None)

        channel.on_frames = on_frames
        for i in range(500):  # all queued before anything reads them: one drain takes them
            router.send_multipart([identity, str(i).encode()])
        _wait_queued(dealer)
        channel.send([b"poke"])
        await asyncio.wait_for(done, 5.0)
        channel.close()
        return received

    assert asyncio.run(scenario()) == [str(i).encode() for i in range(500)]


def test_a_router_channel_hands_on_the_sender_id_as_bytes_and_every_frame(pair) -> None:
    router, dealer = pair

    async def scenario() -> list[list[Any]]:
        loop = asyncio.get_running_loop()
        received: list[list[Any]] = []
        done = loop.create_future()

        def on_frames(frames: list[Any]) -> None:
            received.append(frames)
            if len(received) == 2 and not done.done():
                done.set_result(None)

        channel = Channel(router, on_frames, loop, "test")
        dealer.send_multipart([b"one"])
        dealer.send_multipart([b"two", b"a", b"b"])
        await asyncio.wait_for(done, 5.0)
        channel.detach()  # the fixture closes the socket
        return received

    first, second = asyncio.run(scenario())
    assert first[0] == b"dealer" and type(first[0]) is bytes
    assert [f.bytes for f in first[1:]] == [b"one"]
    assert second[0] == b"dealer"
    assert [f.bytes for f in second[1:]] == [b"two", b"a", b"b"]
