"""Bus benchmark: Arena's bus against raw pyzmq and Ray, side by side, same 256-byte payload.

Cases (each server in its own process, loopback ipc):
  (a) raw pyzmq DEALER -> ROUTER echo with msgpack: the practical limit;
  (b) Arena: request/reply through the broker to an echo actor in another process;
  (c) the same with 64 requests in flight;
  (d) Ray actor method calls, sync and 64 in flight (needs the `bench` extra; skipped if absent);
  (e) encoding + decoding one 8k-token turn (int32 ids + float32 logprobs) as frames vs lists.

Prints a table, then one JSON line. Usage: python bench/bus.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np
import zmq

from arena.bus import Actor, decode, encode

PAYLOAD = b"x" * 256
WINDOW = 64


def raw_echo_server(address: str) -> None:
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(address)
    while True:
        ident, data = sock.recv_multipart()
        msg = msgpack.unpackb(data)
        if msg.get("stop"):
            break
        sock.send_multipart([ident, msgpack.packb({"id": msg["id"], "payload": msg["payload"]})])


def bench_raw(address: str, seconds: float) -> tuple[float, float, float]:
    proc = mp.get_context("spawn").Process(target=raw_echo_server, args=(address,), daemon=True)
    proc.start()
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(address)
    sock.send(msgpack.packb({"id": -1, "payload": PAYLOAD}))  # wait for the server to be up
    sock.recv()
    latencies = []
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        sock.send(msgpack.packb({"id": n, "payload": PAYLOAD}))
        msgpack.unpackb(sock.recv())
        latencies.append(time.perf_counter() - t0)
        n += 1
    sync_rps = n / (time.perf_counter() - start)
    sent = received = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or received < sent:
        while sent - received < WINDOW and time.perf_counter() - start < seconds:
            sock.send(msgpack.packb({"id": sent, "payload": PAYLOAD}))
            sent += 1
        msgpack.unpackb(sock.recv())
        received += 1
    pipelined_rps = received / (time.perf_counter() - start)
    sock.send(msgpack.packb({"id": 0, "payload": b"", "stop": True}))
    proc.join(timeout=5)
    sock.close(linger=0)
    return sync_rps, pipelined_rps, statistics.median(latencies) * 1e6


async def bus_client(address: str, seconds: float) -> tuple[float, float, float]:
    actor = Actor("bench-client", address, request_timeout=10.0)
    await actor.start()
    for _ in range(50):  # wait until the echo actor has registered
        try:
            await actor.request(PAYLOAD, service="bench.echo", timeout=1.0)
            break
        except Exception:
            await asyncio.sleep(0.1)
    latencies = []
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        await actor.request(PAYLOAD, service="bench.echo")
        latencies.append(time.perf_counter() - t0)
        n += 1
    sync_rps = n / (time.perf_counter() - start)

    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await actor.request(PAYLOAD, service="bench.echo")
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(WINDOW)))
    pipelined_rps = done / (time.perf_counter() - start)
    await actor.close()
    return sync_rps, pipelined_rps, statistics.median(latencies) * 1e6


def bench_bus(address: str, seconds: float) -> tuple[float, float, float]:
    python = sys.executable
    broker = subprocess.Popen([python, "-m", "arena.cli", "broker", "--bind", address])
    echo = subprocess.Popen([python, "-m", "arena.bus.echo", address, "--service", "bench.echo"],
                            stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        return asyncio.run(bus_client(address, seconds))
    finally:
        for proc in (echo, broker):
            proc.terminate()
            proc.wait(timeout=10)


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each throughput case")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="arena-bench-")
    raw_sync, raw_pipe, raw_median = bench_raw(f"ipc://{tmp}/raw", args.seconds)
    bus_sync, bus_pipe, bus_median = bench_bus(f"ipc://{tmp}/bus", args.seconds)
    ray_sync, ray_pipe, ray_note = bench_ray(args.seconds)
    codec_us, lists_us = bench_codec()

    def fmt(x: float | None) -> str:
        return "skipped" if x is None else f"{x:,.0f}"

    print(f"{'case':44s} {'sync rps':>10s} {'64 in flight':>13s} {'median us':>10s}")
    print(f"{'(a) raw pyzmq DEALER<->ROUTER + msgpack':44s} {fmt(raw_sync):>10s} {fmt(raw_pipe):>13s} {raw_median:>10.0f}")
    print(f"{'(b,c) arena bus via broker to echo actor':44s} {fmt(bus_sync):>10s} {fmt(bus_pipe):>13s} {bus_median:>10.0f}")
    print(f"{'(d) ' + ray_note:44s} {fmt(ray_sync):>10s} {fmt(ray_pipe):>13s}")
    print(f"(e) 8k-token turn encode+decode: frames {codec_us:.1f} us, msgpack lists {lists_us:.0f} us")
    print(f"    machine: {os.cpu_count()} cores; loopback ipc")
    result = {
        "raw_sync_rps": round(raw_sync), "bus_sync_rps": round(bus_sync),
        "raw_pipelined_rps": round(raw_pipe), "bus_pipelined_rps": round(bus_pipe),
        "ray_sync_rps": None if ray_sync is None else round(ray_sync),
        "ray_pipelined_rps": None if ray_pipe is None else round(ray_pipe),
        "ratio_sync_vs_raw": round(bus_sync / raw_sync, 3),
        "ratio_pipelined_vs_raw": round(bus_pipe / raw_pipe, 3),
        "ratio_vs_ray": None if ray_sync is None else round(bus_sync / ray_sync, 2),
        "ratio_pipelined_vs_ray": None if ray_pipe is None else round(bus_pipe / ray_pipe, 2),
        "codec_8k_us": round(codec_us, 2), "msgpack_lists_8k_us": round(lists_us, 1),
    }  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
