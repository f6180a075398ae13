"""``arena broker --bind ADDR``: run a broker until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bind",
        action="append",
        required=True,
        help="address to bind, e.g. tcp://*:5555 or ipc:///tmp/arena.sock (repeatable)",
    )
    parser.add_argument(
        "--heartbeat-interval", type=float, default=1.0, help="seconds between heartbeats"
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=5.0,
        help="seconds of silence before an actor is declared dead",
    )
    parser.add_argument(
        "--max-message-mb", type=int, default=256, help="largest accepted message, MiB"
    )


def run(args: argparse.Namespace) -> int:
    from arena.bus.broker import Broker
    from arena.core.process import on_stop_signal

    broker = Broker(
        args.bind,
        heartbeat_interval=args.heartbeat_interval,
        heartbeat_timeout=args.heartbeat_timeout,
        max_message_bytes=args.max_message_mb << 20,
    )
    on_stop_signal(broker.stop)
    print(f"arena broker listening on {', '.join(broker.bound)}", flush=True)
    broker.serve_forever()
    return 0
