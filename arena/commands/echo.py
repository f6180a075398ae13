"""``arena echo ADDR``: an actor that answers every request on a service with its body."""

from __future__ import annotations

import argparse

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", help="broker address, e.g. tcp://127.0.0.1:5555")
    add_bus_arguments(parser, connect=False)
    parser.add_argument("--name", default="echo", help="actor name on the bus (default echo)")
    parser.add_argument(
        "--service", default="bench.echo", help="service to answer (default bench.echo)"
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=1.0,
        help="seconds between heartbeats (default 1.0)",
    )
    parser.add_argument(
        "--loop",
        choices=["asyncio", "uvloop"],
        default="asyncio",
        help="event loop (default asyncio); uvloop must be installed (it is not a dependency)",
    )


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    import asyncio

    from arena.bus.echo import serve_echo
    from arena.core.process import serve

    runner = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        runner = uvloop.run
    serve(
        lambda stop: serve_echo(
            args.address, args.name, args.service, args.heartbeat_interval, stop
        ),
        runner,
    )
    return 0
