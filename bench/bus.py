"""Bus benchmark: Arena's bus against raw pyzmq and Ray, side by side, same 256-byte payload.

Cases (each server in its own process, loopback ipc, or tcp with --transport tcp):
  (a)  raw pyzmq DEALER -> ROUTER echo with msgpack: the practical limit of one hop each way;
  (a2) raw pyzmq through a zero-logic Python ROUTER forwarder to a raw echo: what any design
       with a broker process in the path can reach here (four hops, no validation, no asyncio);
  (b)  Arena: request/reply through the broker to an echo actor in another process;
  (c)  the same with 64 requests in flight;
  (d)  Ray actor method calls, sync and 64 in flight (needs the `bench` extra; skipped if absent);
  (e)  encoding + decoding one 8k-token turn (int32 ids + float32 logprobs) as frames vs lists.

On a shared machine the load changes from second to second, so (a), (a2) and (b, c) run
interleaved in short segments, several rounds, in rotating order; each ratio is the median of
its per-round ratios and each rate the median of its rounds.

Prints a table, then one JSON line. Usage: python bench/bus.py [--seconds 2] [--rounds 3]
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

from arena.bus import Actor, decode, encode

PAYLOAD = b"x" * 256
WINDOW = 64
FLOOR_ECHO = b"floor-echo"


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


async def bus_client(address: str) -> Actor:
    actor = Actor("bench-client", address, request_timeout=10.0)
    await actor.start()
    for _ in range(100):  # wait until the echo actor has registered
        try:
            await actor.request(PAYLOAD, service="bench.echo", timeout=1.0)
            return actor
        except Exception:
            await asyncio.sleep(0.1)
    raise TimeoutError("the echo actor did not register")


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
    if transport == "ipc":
        raw_addr, floor_addr, bus_addr = (f"ipc://{tmp}/{name}" for name in ("raw", "floor", "bus"))
    else:
        raw_addr, floor_addr, bus_addr = (f"tcp://127.0.0.1:{free_tcp_port()}" for _ in range(3))
    servers = [
        spawn.Process(target=raw_echo_server, args=(raw_addr,), daemon=True),
        spawn.Process(target=forwarder, args=(floor_addr,), daemon=True),
        spawn.Process(target=floor_echo_server, args=(floor_addr,), daemon=True),
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
        actor = await bus_client(bus_addr)
        segment = seconds / rounds
        latencies: dict[str, list[float]] = {"raw": [], "floor": [], "bus": []}

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
        }
        rates: dict[str, list[float]] = {f"{c}_{m}": [] for c in cases for m in ("sync", "pipe")}
        names = list(cases)
        for r in range(rounds):
            order = names[r % 3 :] + names[: r % 3]  # rotate, so no case always runs first
            for mode, index in (("sync", 0), ("pipe", 1)):
                for name in order:
                    rates[f"{name}_{mode}"].append(await cases[name][index]())
        await actor.close()
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
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="arena-bench-")
    load_before = os.getloadavg()[0]
    runner = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        runner = uvloop.run
    run = runner(run_cases(tmp, args.seconds, args.rounds, args.loop, args.transport))
    ray_sync, ray_pipe, ray_note = bench_ray(args.seconds)
    codec_us, lists_us = bench_codec()
    load_after = os.getloadavg()[0]

    rates, median_us = run["rates"], run["median_us"]
    med = {k: statistics.median(v) for k, v in rates.items()}

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(rates[a], rates[b], strict=True))

    def fmt(x: float | None) -> str:
        return "skipped" if x is None else f"{x:,.0f}"

    rows = [
        ("(a) raw pyzmq DEALER<->ROUTER + msgpack", "raw"),
        ("(a2) raw pyzmq via zero-logic forwarder", "floor"),
        (f"(b,c) arena bus via broker ({args.loop})", "bus"),
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
        f"    bus / raw: sync {ratio('bus_sync', 'raw_sync'):.2f}, pipelined {ratio('bus_pipe', 'raw_pipe'):.2f};"
        f" bus / forwarder: {ratio('bus_sync', 'floor_sync'):.2f}, {ratio('bus_pipe', 'floor_pipe'):.2f};"
        f" forwarder / raw: {ratio('floor_sync', 'raw_sync'):.2f}, {ratio('floor_pipe', 'raw_pipe'):.2f}"
    )
    print(
        f"    machine: {os.cpu_count()} cores, load average {load_before:.1f} -> {load_after:.1f};"
        f" loopback {args.transport}; {args.rounds} interleaved rounds, medians"
    )
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
        "median_us": {k: round(v) for k, v in median_us.items()},
        "rounds": args.rounds,
        "loop": args.loop,
        "transport": args.transport,
        "load_avg": [round(load_before, 2), round(load_after, 2)],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
