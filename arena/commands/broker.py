"""``arena broker --bind ADDR [--keys DIR]``: run a broker until Ctrl-C or SIGTERM.

With ``--keys`` (or ``ARENA_KEYS``) it loads the keypair ``broker`` and admits only the keys in
DIR/authorized/; without, it binds only loopback or ipc:// addresses unless ``--insecure``.
"""

from __future__ import annotations

import argparse

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bind",
        action="append",
        required=True,
        help="address to bind, e.g. tcp://*:5555 or ipc:///tmp/arena.sock (repeatable)",
    )
    add_bus_arguments(parser, connect=False)
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=1.0,
        help="seconds between heartbeats (default 1.0)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=5.0,
        help="seconds of silence before an actor is declared dead (default 5.0; a run's own "
        "broker and arena deploy's take the run's bus.heartbeat_timeout, 10 by default)",
    )
    parser.add_argument(
        "--max-message-mb",
        type=int,
        default=256,
        help="largest accepted message, MiB (default 256)",
    )


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
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
