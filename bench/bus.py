"""Bus benchmark: Arena's bus against raw pyzmq and Ray, side by side, same 256-byte payload.

Cases (each server in its own process, loopback ipc, or tcp with --transport tcp):
  (a)  raw pyzmq DEALER -> ROUTER echo with msgpack: the practical limit of one hop each way;
  (a2) raw pyzmq through a zero-logic Python ROUTER forwarder to a raw echo: what any design
       with a broker process in the path can reach here (four hops, no validation, no asyncio);
  (b)  Arena brokered (``routing="brokered"``): request/reply through the broker to an echo actor
       in another process, one at a time and 64 in flight;
  (c)  Arena direct (``routing="direct"``): a second client resolves the same echo actor through
       the broker once, then requests go peer to peer (two hops), one at a time and 64 in flight;
  (d)  Ray actor method calls, sync and 64 in flight (needs the `bench` extra; skipped if absent);
  (e)  encoding + decoding one 8k-token turn (int32 ids + float32 logprobs) as frames vs lists;
  (f)  bulk: one 64 MiB frame to another process over tcp://127.0.0.1 and a tiny ack back, raw
       pyzmq DEALER -> ROUTER against a direct Actor sending ``Blob(data)`` to a sink actor
       (MiB/s; always tcp, whatever --transport says);
  (g)  asyncio floor: the echo of (a), with both ends minimal asyncio programs written the way any
       asyncio bus must read ZeroMQ: ``loop.add_reader`` on the socket's descriptor, a drain with
       NOBLOCK receives, one future per request resolved by id; no Arena code. It is what (c)
       can reach at best on this machine with asyncio at both ends.

On a shared machine the load changes from second to second, so (a), (a2), (b), (c) and (g) run
interleaved in short segments, several rounds, in rotating order; each ratio is the median of
its per-round ratios and each rate the median of its rounds. (f) alternates raw and direct
transfers the same way.

Prints a table, then one JSON line.
Usage: python bench/bus.py [--seconds 2] [--rounds 3] [--transport ipc|tcp] [--bulk-transfers 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack
import numpy as np
import zmq

from arena.bus import Actor, Blob, decode, encode

PAYLOAD = b"x" * 256
WINDOW = 64
FLOOR_ECHO = b"floor-echo"
BULK_BYTES = 64 << 20
BULK_MAX_MESSAGE_MB = 128
BULK_MAX_MESSAGE_BYTES = BULK_MAX_MESSAGE_MB << 20
MIB = 1 << 20


# -- servers -----------------------------------------------------------------------------------
def raw_echo_server(address: str) -> None:
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(address)
    while True:
        ident, data = sock.recv_multipart()
        msg = msgpack.unpackb(data)
        if msg.get("stop"):
            break
        sock.send_multipart([ident, msgpack.packb({"id": msg["id"], "payload": msg["payload"]})])


def forwarder(address: str) -> None:
    """A ROUTER that swaps sender and destination: routing with no validation or bookkeeping."""
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(address)
    while True:
        src, dst, data = sock.recv_multipart()
        sock.send_multipart([dst, src, data])


def floor_echo_server(address: str) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, FLOOR_ECHO)
    sock.connect(address)
    sock.send_multipart([FLOOR_ECHO, b"hello"])  # through the forwarder to itself: it is routable
    while True:
        src, data = sock.recv_multipart()
        if data == b"hello":
            continue
        msg = msgpack.unpackb(data)
        sock.send_multipart([src, msgpack.packb({"id": msg["id"], "payload": msg["payload"]})])


def asyncio_floor_server(address: str, loop: str) -> None:
    """(g)'s echo: a ROUTER on an asyncio loop, drained from ``add_reader`` with NOBLOCK receives.

    Replies are sent only while draining, and every drain ends with an ``EVENTS`` check made after
    its last send, so no edge is lost."""

    async def serve() -> None:
        sock = zmq.Context.instance().socket(zmq.ROUTER)
        sock.bind(address)
        events, pollin, noblock = zmq.EVENTS, zmq.POLLIN, zmq.NOBLOCK

        def drain() -> None:
            while sock.getsockopt(events) & pollin:
                ident = sock.recv(noblock)
                msg = msgpack.unpackb(sock.recv(noblock))
                reply = msgpack.packb({"id": msg["id"], "payload": msg["payload"]})
                sock.send_multipart([ident, reply], noblock)

        running = asyncio.get_running_loop()
        running.add_reader(sock.getsockopt(zmq.FD), drain)
        running.call_soon(drain)  # input may be queued already (its edge came before the reader)
        await asyncio.Event().wait()

    if loop == "uvloop":
        import uvloop

        uvloop.run(serve())
    else:
        asyncio.run(serve())


def raw_bulk_server(address: str) -> None:
    """A ROUTER that takes one frame and answers with its length (8 bytes)."""
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(address)
    while True:
        ident, data = sock.recv_multipart()
        sock.send_multipart([ident, len(data).to_bytes(8, "little")])


def sink_server(address: str) -> None:
    """An actor serving ``bench.sink``: the byte length of the Blob it was sent."""

    async def serve() -> None:
        actor = Actor(
            "bench-sink",
            address,
            kind="sink",
            services={"bench.sink": lambda msg: len(msg.body)},
            max_message_bytes=BULK_MAX_MESSAGE_BYTES,
        )
        await actor.start()
        await asyncio.Event().wait()

    asyncio.run(serve())


# -- clients -----------------------------------------------------------------------------------
class RawClient:
    """A blocking DEALER client; ``route`` is the frames put before the payload (the forwarder's
    destination), empty for the direct case."""

    def __init__(self, address: str, route: list[bytes]) -> None:
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect(address)
        self.route = route
        deadline = time.monotonic() + 20
        while not self.sock.poll(100, zmq.POLLOUT) or not self._probe():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no echo server answered at {address}")

    def _probe(self) -> bool:
        self.sock.send_multipart([*self.route, msgpack.packb({"id": -1, "payload": PAYLOAD})])
        if self.sock.poll(500):
            self.sock.recv_multipart()
            return True
        return False

    def call(self, n: int) -> None:
        self.sock.send_multipart([*self.route, msgpack.packb({"id": n, "payload": PAYLOAD})])
        msgpack.unpackb(self.sock.recv_multipart()[-1])

    def sync(self, seconds: float, latencies: list[float]) -> float:
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            self.call(n)
            latencies.append(time.perf_counter() - t0)
            n += 1
        return n / (time.perf_counter() - start)

    def pipelined(self, seconds: float) -> float:
        sock, route = self.sock, self.route
        sent = received = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or received < sent:
            while sent - received < WINDOW and time.perf_counter() - start < seconds:
                sock.send_multipart([*route, msgpack.packb({"id": sent, "payload": PAYLOAD})])
                sent += 1
            msgpack.unpackb(sock.recv_multipart()[-1])
            received += 1
        return received / (time.perf_counter() - start)


class AsyncFloorClient:
    """(g)'s client: a DEALER on the running loop, watched with ``add_reader``; each request gets
    a future, resolved by id when its reply is drained."""

    def __init__(self, address: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect(address)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.scheduled = False
        self.fd = self.sock.getsockopt(zmq.FD)
        self.loop.add_reader(self.fd, self.drain)
        self.scheduled = True
        self.loop.call_soon(self.drain)

    def drain(self) -> None:
        self.scheduled = False
        sock, pending = self.sock, self.pending
        while sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            msg = msgpack.unpackb(sock.recv(zmq.NOBLOCK))
            fut = pending.pop(msg["id"], None)
            if fut is not None and not fut.done():
                fut.set_result(msg["payload"])

    def request(self, payload: bytes) -> asyncio.Future[Any]:
        n = self.next_id
        self.next_id = n + 1
        fut = self.pending[n] = self.loop.create_future()
        sock = self.sock
        sock.send(msgpack.packb({"id": n, "payload": payload}), zmq.NOBLOCK)
        # The send may have consumed the descriptor's edge: look for input ourselves.
        if not self.scheduled and sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            self.scheduled = True
            self.loop.call_soon(self.drain)
        return fut

    async def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            n = self.next_id
            try:
                await asyncio.wait_for(self.request(PAYLOAD), 0.5)
                return
            except TimeoutError:
                self.pending.pop(n, None)
                if time.monotonic() > deadline:
                    raise TimeoutError("no asyncio floor echo server answered") from None

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
        self.sock.close(linger=0)


async def floor_sync(client: AsyncFloorClient, seconds: float, latencies: list[float]) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        await client.request(PAYLOAD)
        latencies.append(time.perf_counter() - t0)
        n += 1
    return n / (time.perf_counter() - start)


async def floor_pipelined(client: AsyncFloorClient, seconds: float) -> float:
    """64 in flight, as :func:`bus_pipelined`: one coroutine per outstanding request."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await client.request(PAYLOAD)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(WINDOW)))
    return done / (time.perf_counter() - start)


async def bus_sync(actor: Actor, seconds: float, latencies: list[float]) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        await actor.request(PAYLOAD, service="bench.echo")
        latencies.append(time.perf_counter() - t0)
        n += 1
    return n / (time.perf_counter() - start)


async def bus_pipelined(actor: Actor, seconds: float) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await actor.request(PAYLOAD, service="bench.echo")
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(WINDOW)))
    return done / (time.perf_counter() - start)


async def bus_client(
    address: str,
    name: str,
    routing: str,
    service: str = "bench.echo",
    probe: Any = PAYLOAD,
    max_message_bytes: int | None = None,
    request_timeout: float = 10.0,
) -> Actor:
    """A client Actor, returned once ``service`` has answered (it registered, and for direct
    routing the peer connection is up)."""
    extra = {} if max_message_bytes is None else {"max_message_bytes": max_message_bytes}
    actor = Actor(name, address, request_timeout=request_timeout, routing=routing, **extra)
    await actor.start()
    for _ in range(100):  # wait until the serving actor has registered
        try:
            await actor.request(probe, service=service, timeout=1.0)
            return actor
        except Exception:
            await asyncio.sleep(0.1)
    await actor.close()
    raise TimeoutError(f"the {service} actor did not answer {name}")


def goes_direct(actor: Actor) -> bool:
    """Whether ``actor`` holds a connected peer, i.e. its requests skip the broker."""
    return any(peer.connected for peer in actor.directory._peers.values())


# -- the interleaved run -----------------------------------------------------------------------
Segment = Callable[[], Awaitable[float]]


def free_tcp_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def run_cases(
    tmp: str, seconds: float, rounds: int, loop: str, transport: str
) -> dict[str, Any]:
    spawn = mp.get_context("spawn")
    names = ("raw", "floor", "bus", "afloor")
    if transport == "ipc":
        raw_addr, floor_addr, bus_addr, afloor_addr = (f"ipc://{tmp}/{name}" for name in names)
    else:
        raw_addr, floor_addr, bus_addr, afloor_addr = (
            f"tcp://127.0.0.1:{free_tcp_port()}" for _ in names
        )
    servers = [
        spawn.Process(target=raw_echo_server, args=(raw_addr,), daemon=True),
        spawn.Process(target=forwarder, args=(floor_addr,), daemon=True),
        spawn.Process(target=floor_echo_server, args=(floor_addr,), daemon=True),
        spawn.Process(target=asyncio_floor_server, args=(afloor_addr, loop), daemon=True),
    ]
    for proc in servers:
        proc.start()
    python = sys.executable
    broker = subprocess.Popen([python, "-m", "arena", "broker", "--bind", bus_addr])
    loop_args = ["--loop", loop] if loop != "asyncio" else []
    echo = subprocess.Popen(
        [python, "-m", "arena", "echo", bus_addr, "--service", "bench.echo", *loop_args],
        stdout=subprocess.DEVNULL,
    )
    try:
        raw, floor = RawClient(raw_addr, []), RawClient(floor_addr, [FLOOR_ECHO])
        actor = await bus_client(bus_addr, "bench-client", "brokered")
        direct = await bus_client(bus_addr, "bench-direct", "direct")
        if not goes_direct(direct):
            raise RuntimeError("bench-direct has no peer connection: its requests use the broker")
        afloor = AsyncFloorClient(afloor_addr)
        await afloor.wait_ready()
        segment = seconds / rounds
        latencies: dict[str, list[float]] = {
            "raw": [],
            "floor": [],
            "bus": [],
            "direct": [],
            "asyncio_floor": [],
        }

        async def blocking(fn: Callable[..., float], *args: Any) -> float:
            return fn(*args)  # raw clients block the loop: nothing else runs during a segment

        cases: dict[str, tuple[Segment, Segment]] = {
            "raw": (
                lambda: blocking(raw.sync, segment, latencies["raw"]),
                lambda: blocking(raw.pipelined, segment),
            ),
            "floor": (
                lambda: blocking(floor.sync, segment, latencies["floor"]),
                lambda: blocking(floor.pipelined, segment),
            ),
            "bus": (
                lambda: bus_sync(actor, segment, latencies["bus"]),
                lambda: bus_pipelined(actor, segment),
            ),
            "direct": (
                lambda: bus_sync(direct, segment, latencies["direct"]),
                lambda: bus_pipelined(direct, segment),
            ),
            "asyncio_floor": (
                lambda: floor_sync(afloor, segment, latencies["asyncio_floor"]),
                lambda: floor_pipelined(afloor, segment),
            ),
        }
        rates: dict[str, list[float]] = {f"{c}_{m}": [] for c in cases for m in ("sync", "pipe")}
        order_base = list(cases)
        for r in range(rounds):
            shift = r % len(order_base)
            order = order_base[shift:] + order_base[:shift]  # rotate, so no case always runs first
            for mode, index in (("sync", 0), ("pipe", 1)):
                for name in order:
                    rates[f"{name}_{mode}"].append(await cases[name][index]())
        await actor.close()
        await direct.close()
        afloor.close()
        for client in (raw, floor):
            client.sock.close(linger=0)
        return {
            "rates": rates,
            "median_us": {k: statistics.median(v) * 1e6 for k, v in latencies.items()},
        }
    finally:
        for proc in (echo, broker):
            proc.terminate()
            proc.wait(timeout=10)
        for server in servers:
            server.kill()


class RawBulkClient:
    """A blocking DEALER that sends one large frame (zero-copy) and waits for the ack."""

    def __init__(self, address: str) -> None:
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect(address)
        deadline = time.monotonic() + 20
        while True:
            self.sock.send(b"probe")
            if self.sock.poll(500):
                self.sock.recv()
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no bulk server answered at {address}")

    def transfer(self, data: bytes) -> float:
        start = time.perf_counter()
        self.sock.send(data, copy=False)
        ack = self.sock.recv()
        elapsed = time.perf_counter() - start
        assert int.from_bytes(ack, "little") == len(data)
        return elapsed


async def direct_transfer(actor: Actor, data: bytes) -> float:
    start = time.perf_counter()
    reply = await actor.request(Blob(data), service="bench.sink")
    elapsed = time.perf_counter() - start
    assert reply.body == len(data)
    return elapsed


async def run_bulk(transfers: int) -> dict[str, list[float]]:
    """(f): raw and direct 64 MiB transfers over tcp loopback, alternating; MiB/s of each."""
    spawn = mp.get_context("spawn")
    raw_addr, bus_addr = (f"tcp://127.0.0.1:{free_tcp_port()}" for _ in range(2))
    servers = [
        spawn.Process(target=raw_bulk_server, args=(raw_addr,), daemon=True),
        spawn.Process(target=sink_server, args=(bus_addr,), daemon=True),
    ]
    broker = subprocess.Popen(
        [sys.executable, "-m", "arena", "broker", "--bind", bus_addr]
        + ["--max-message-mb", str(BULK_MAX_MESSAGE_MB)],
        stdout=subprocess.DEVNULL,
    )
    for proc in servers:
        proc.start()
    try:
        data = os.urandom(BULK_BYTES)  # not zeros: a zero page would flatter the copies
        raw = RawBulkClient(raw_addr)
        actor = await bus_client(
            bus_addr,
            "bench-bulk",
            "direct",
            service="bench.sink",
            probe=Blob(b"probe"),
            max_message_bytes=BULK_MAX_MESSAGE_BYTES,
            request_timeout=60.0,
        )
        if not goes_direct(actor):
            raise RuntimeError("bench-bulk has no peer connection: its requests use the broker")
        raw.transfer(data)  # warm both paths (buffers, TCP windows)
        await direct_transfer(actor, data)
        mib = BULK_BYTES / MIB
        rates: dict[str, list[float]] = {"raw": [], "direct": []}
        for i in range(transfers):
            for name in ("raw", "direct") if i % 2 == 0 else ("direct", "raw"):
                if name == "raw":
                    elapsed = raw.transfer(data)
                else:
                    elapsed = await direct_transfer(actor, data)
                rates[name].append(mib / elapsed)
        await actor.close()
        raw.sock.close(linger=0)
        return rates
    finally:
        broker.terminate()
        broker.wait(timeout=10)
        for server in servers:
            server.kill()


def bench_ray(seconds: float) -> tuple[float | None, float | None, str]:
    try:
        import ray
    except ImportError:
        return None, None, "ray not installed (pip install -e '.[bench]'): skipped"
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    @ray.remote
    class Echo:
        def echo(self, payload: bytes) -> bytes:
            return payload

    echo = Echo.remote()
    ray.get(echo.echo.remote(PAYLOAD))
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        ray.get(echo.echo.remote(PAYLOAD))
        n += 1
    sync_rps = n / (time.perf_counter() - start)
    done, start = 0, time.perf_counter()
    in_flight = [echo.echo.remote(PAYLOAD) for _ in range(WINDOW)]
    while time.perf_counter() - start < seconds:
        ready, in_flight = ray.wait(in_flight, num_returns=1)
        ray.get(ready)
        done += 1
        in_flight.append(echo.echo.remote(PAYLOAD))
    ray.get(in_flight)
    done += len(in_flight)
    pipelined_rps = done / (time.perf_counter() - start)
    ray.shutdown()
    return sync_rps, pipelined_rps, f"ray {ray.__version__}"


def bench_codec(repeats: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 49152, 8192, dtype=np.int32)
    logprobs = rng.standard_normal(8192).astype(np.float32)
    body = {"response_ids": ids, "response_logprobs": logprobs}

    def frames_roundtrip() -> None:
        _, frames = encode("episode", body, src="a", service="learner")
        out = decode([bytes(f) if not isinstance(f, bytes) else f for f in frames]).body
        assert out["response_ids"][-1] == ids[-1]

    def lists_roundtrip() -> None:
        data = msgpack.packb({"response_ids": ids.tolist(), "response_logprobs": logprobs.tolist()})
        out = msgpack.unpackb(data)
        np.asarray(out["response_ids"], np.int32), np.asarray(out["response_logprobs"], np.float32)

    results = []
    for fn, n in ((frames_roundtrip, repeats), (lists_roundtrip, max(repeats // 20, 20))):
        fn()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            times.append((time.perf_counter() - start) / n)
        results.append(min(times) * 1e6)
    return results[0], results[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="time spent on each throughput case"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds the time is split into"
    )
    parser.add_argument(
        "--loop",
        choices=["asyncio", "uvloop"],
        default="asyncio",
        help="event loop of the bus client and echo actor (uvloop is not a dependency)",
    )
    parser.add_argument(
        "--transport", choices=["ipc", "tcp"], default="ipc", help="loopback transport"
    )
    parser.add_argument(
        "--bulk-transfers",
        type=int,
        default=5,
        help="64 MiB transfers timed for each side of (f), raw and direct",
    )
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="arena-bench-")
    load_before = os.getloadavg()[0]
    runner = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        runner = uvloop.run
    run = runner(run_cases(tmp, args.seconds, args.rounds, args.loop, args.transport))
    bulk = runner(run_bulk(args.bulk_transfers))
    ray_sync, ray_pipe, ray_note = bench_ray(args.seconds)
    codec_us, lists_us = bench_codec()
    load_after = os.getloadavg()[0]

    rates, median_us = run["rates"], run["median_us"]
    med = {k: statistics.median(v) for k, v in rates.items()}
    bulk_mib_s, raw_bulk_mib_s = (statistics.median(bulk[k]) for k in ("direct", "raw"))
    ratio_bulk = statistics.median(d / r for d, r in zip(bulk["direct"], bulk["raw"], strict=True))

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(rates[a], rates[b], strict=True))

    def vs_ray(key: str, ray_rps: float | None) -> float | None:
        return None if ray_rps is None else med[key] / ray_rps

    def fmt(x: float | None) -> str:
        return "skipped" if x is None else f"{x:,.0f}"

    def target(value: float | None, goal: float) -> str:
        if value is None:
            return f"n/a (target >= {goal:g})"
        return f"{value:.2f} (target >= {goal:g}: {'met' if value >= goal else 'MISSED'})"

    direct_sync_vs_raw = ratio("direct_sync", "raw_sync")
    direct_pipe_vs_raw = ratio("direct_pipe", "raw_pipe")
    direct_vs_ray_sync = vs_ray("direct_sync", ray_sync)
    direct_vs_ray_pipe = vs_ray("direct_pipe", ray_pipe)
    afloor_sync_vs_raw = ratio("asyncio_floor_sync", "raw_sync")
    afloor_pipe_vs_raw = ratio("asyncio_floor_pipe", "raw_pipe")
    direct_sync_vs_afloor = ratio("direct_sync", "asyncio_floor_sync")
    direct_pipe_vs_afloor = ratio("direct_pipe", "asyncio_floor_pipe")

    rows = [
        ("(a) raw pyzmq DEALER<->ROUTER + msgpack", "raw"),
        ("(a2) raw pyzmq via zero-logic forwarder", "floor"),
        (f"(b) arena bus brokered ({args.loop})", "bus"),
        (f"(c) arena bus direct ({args.loop})", "direct"),
        (f"(g) asyncio floor, add_reader ({args.loop})", "asyncio_floor"),
    ]
    print(f"{'case':44s} {'sync rps':>10s} {'64 in flight':>13s} {'median us':>10s}")
    for label, key in rows:
        print(
            f"{label:44s} {fmt(med[key + '_sync']):>10s} {fmt(med[key + '_pipe']):>13s} {median_us[key]:>10.0f}"
        )
    print(f"{'(d) ' + ray_note:44s} {fmt(ray_sync):>10s} {fmt(ray_pipe):>13s}")
    print(
        f"(e) 8k-token turn encode+decode: frames {codec_us:.1f} us, msgpack lists {lists_us:.0f} us"
    )
    print(
        f"(f) 64 MiB over tcp loopback, median of {args.bulk_transfers}: raw pyzmq"
        f" {raw_bulk_mib_s:,.0f} MiB/s, arena direct Blob {bulk_mib_s:,.0f} MiB/s"
    )
    print(
        f"    brokered / raw: sync {ratio('bus_sync', 'raw_sync'):.2f}, pipelined {ratio('bus_pipe', 'raw_pipe'):.2f};"
        f" brokered / forwarder: {ratio('bus_sync', 'floor_sync'):.2f}, {ratio('bus_pipe', 'floor_pipe'):.2f};"
        f" forwarder / raw: {ratio('floor_sync', 'raw_sync'):.2f}, {ratio('floor_pipe', 'raw_pipe'):.2f}"
    )
    print(
        f"    direct / raw: sync {target(direct_sync_vs_raw, 0.5)},"
        f" pipelined {target(direct_pipe_vs_raw, 0.5)}"
    )
    print(
        f"    direct / Ray: sync {target(direct_vs_ray_sync, 5)},"
        f" pipelined {target(direct_vs_ray_pipe, 10)}"
    )
    print(
        f"    direct / asyncio floor: sync {direct_sync_vs_afloor:.2f}, pipelined {direct_pipe_vs_afloor:.2f};"
        f" asyncio floor / raw: sync {afloor_sync_vs_raw:.2f}, pipelined {afloor_pipe_vs_raw:.2f}"
    )
    print(f"    bulk direct / raw: {target(ratio_bulk, 0.5)}")
    print(
        f"    machine: {os.cpu_count()} cores, load average {load_before:.1f} -> {load_after:.1f};"
        f" loopback {args.transport}; {args.rounds} interleaved rounds, medians"
    )

    def rounded(x: float | None, digits: int) -> float | None:
        return None if x is None else round(x, digits)

    result = {
        "raw_sync_rps": round(med["raw_sync"]),
        "bus_sync_rps": round(med["bus_sync"]),
        "raw_pipelined_rps": round(med["raw_pipe"]),
        "bus_pipelined_rps": round(med["bus_pipe"]),
        "ray_sync_rps": None if ray_sync is None else round(ray_sync),
        "ray_pipelined_rps": None if ray_pipe is None else round(ray_pipe),
        "ratio_sync_vs_raw": round(ratio("bus_sync", "raw_sync"), 3),
        "ratio_pipelined_vs_raw": round(ratio("bus_pipe", "raw_pipe"), 3),
        "ratio_vs_ray": None if ray_sync is None else round(med["bus_sync"] / ray_sync, 2),
        "ratio_pipelined_vs_ray": None
        if ray_pipe is None
        else round(med["bus_pipe"] / ray_pipe, 2),
        "codec_8k_us": round(codec_us, 2),
        "msgpack_lists_8k_us": round(lists_us, 1),
        "floor_sync_rps": round(med["floor_sync"]),
        "floor_pipelined_rps": round(med["floor_pipe"]),
        "ratio_sync_vs_floor": round(ratio("bus_sync", "floor_sync"), 3),
        "ratio_pipelined_vs_floor": round(ratio("bus_pipe", "floor_pipe"), 3),
        "ratio_floor_sync_vs_raw": round(ratio("floor_sync", "raw_sync"), 3),
        "ratio_floor_pipelined_vs_raw": round(ratio("floor_pipe", "raw_pipe"), 3),
        "direct_sync_rps": round(med["direct_sync"]),
        "direct_pipelined_rps": round(med["direct_pipe"]),
        "ratio_direct_sync_vs_raw": round(direct_sync_vs_raw, 3),
        "ratio_direct_pipelined_vs_raw": round(direct_pipe_vs_raw, 3),
        "ratio_direct_vs_ray_sync": rounded(direct_vs_ray_sync, 2),
        "ratio_direct_vs_ray_pipelined": rounded(direct_vs_ray_pipe, 2),
        "bulk_mib_s": round(bulk_mib_s),
        "raw_bulk_mib_s": round(raw_bulk_mib_s),
        "ratio_bulk_vs_raw": round(ratio_bulk, 3),
        "asyncio_floor_sync_rps": round(med["asyncio_floor_sync"]),
        "asyncio_floor_pipelined_rps": round(med["asyncio_floor_pipe"]),
        "ratio_asyncio_floor_sync_vs_raw": round(afloor_sync_vs_raw, 3),
        "ratio_asyncio_floor_pipelined_vs_raw": round(afloor_pipe_vs_raw, 3),
        "ratio_direct_sync_vs_asyncio_floor": round(direct_sync_vs_afloor, 3),
        "ratio_direct_pipelined_vs_asyncio_floor": round(direct_pipe_vs_afloor, 3),
        "median_us": {k: round(v) for k, v in median_us.items()},
        "rounds": args.rounds,
        "loop": args.loop,
        "transport": args.transport,
        "load_avg": [round(load_before, 2), round(load_after, 2)],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
