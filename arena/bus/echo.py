"""An echo actor: replies to every request with its body. For ``bench/bus.py``, tests and for
checking a deployment end to end (``python -m arena.bus.echo tcp://broker:5555``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from arena.bus.actor import Actor


async def serve_echo(address: str, name: str, service: str, heartbeat_interval: float) -> None:
    actor = Actor(name, address, kind="echo", services={service: lambda msg: msg.body},
                  heartbeat_interval=heartbeat_interval)  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await actor.start()
    print(f"echo actor {name} serving {service!r} via {address}", flush=True)
    await stop.wait()
    await actor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("address")
    parser.add_argument("--name", default="echo")
    parser.add_argument("--service", default="bench.echo")
    parser.add_argument("--heartbeat-interval", type=float, default=1.0)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                        help="event loop; uvloop must be installed (it is not a dependency)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    run = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        run = uvloop.run
    run(serve_echo(args.address, args.name, args.service, args.heartbeat_interval))


if __name__ == "__main__":
    main()
