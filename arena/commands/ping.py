"""``arena ping ADDR``: round trips through a broker to its built-in ``echo`` service.

Exit 1 when no broker answers; the message then says that a broker with keys answers only a
client with keys it allows (a CURVE handshake that fails is dropped silently, so a missing
``--keys`` looks exactly like a missing broker)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", help="broker address, e.g. tcp://127.0.0.1:5555")
    add_bus_arguments(parser, connect=False)
    parser.add_argument(
        "-n", "--count", type=int, default=5, help="number of round trips (default 5)"
    )
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for each reply (default 3.0)"
    )


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.bus import BlockingActor, BusError
    from arena.bus.security import keys_hint

    name = f"ping-{os.getpid()}-{int(time.time() * 1000) % 100000}"
    try:
        actor = BlockingActor(name, args.address, request_timeout=args.timeout).start(args.timeout)
    except (BusError, TimeoutError) as err:
        print(
            f"arena ping: no broker at {args.address}: {err}{keys_hint(args.address)}",
            file=sys.stderr,
        )
        return 1
    rtts = []
    try:
        for i in range(args.count):
            start = time.perf_counter()
            reply = actor.call({"seq": i}, service="echo", timeout=args.timeout)
            rtts.append((time.perf_counter() - start) * 1e6)
            if reply != {"seq": i}:
                print(f"arena ping: echo returned {reply!r}", file=sys.stderr)
                return 1
            print(f"reply from {args.address}: seq={i} time={rtts[-1]:.0f} us")
    except BusError as err:
        print(f"arena ping: {err}", file=sys.stderr)
        return 1
    finally:
        actor.close()
    print(
        f"{len(rtts)} round trips: median {statistics.median(rtts):.0f} us, min {min(rtts):.0f} us"
    )
    return 0
