"""``arena status ADDR [--json]``: every actor registered with the broker at ``ADDR`` (or at a
run directory's broker: ``arena status runs/NAME/TIME``).

One row per actor: name, kind, host and pid, the services it offers, its direct endpoint (``-``:
reached through the broker only), the policy version it serves, its queue load (requests in
service at its last heartbeat) and how long ago the broker last heard from it; then the
broker's fault counters (the ``broker.stats`` service: ``actor_dead`` for actors it declared
dead, ``keys_refused`` for handshakes whose key it does not admit, one per kind of rejected
message...). ``--json`` prints the broker's registry as JSON instead (the ``broker.actors``
service).

Exit codes: 0, or 1 when no broker answers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "address",
        help="broker address, e.g. tcp://127.0.0.1:5555, or a run directory (its broker)",
    )
    add_bus_arguments(parser, connect=False)
    parser.add_argument("--json", action="store_true", help="print the registry as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the broker: to register, then for the listing (default 5.0)",
    )


def run(args: argparse.Namespace) -> int:
    run_dir = run_address(args)
    socket = args.address.removeprefix("ipc://") if args.address.startswith("ipc://") else None
    if run_dir and socket and not os.path.exists(socket):  # the run ended: say so at once
        print(
            f"arena status: no broker at {args.address} (the broker of run {run_dir}, which is "
            "not running now): no socket there",
            file=sys.stderr,
        )
        return 1
    apply_bus_arguments(args)
    from arena.bus import BlockingActor, BusError

    name = f"status-{os.getpid()}-{int(time.time() * 1000) % 100000}"
    actor = BlockingActor(name, args.address, kind="status", routing="brokered")
    try:
        # --timeout bounds the registration too, not only the listing request
        actor.start(timeout=args.timeout)
        actors = actor.call(service="broker.actors", timeout=args.timeout)
        counters = {} if args.json else actor.call(service="broker.stats", timeout=args.timeout)
    except (BusError, TimeoutError) as err:
        whose = f" (the broker of run {run_dir}, which is not running now)" if run_dir else ""
        print(f"arena status: no broker at {args.address}{whose}: {err}", file=sys.stderr)
        return 1
    finally:
        actor.close()
    actors = [a for a in actors if a["name"] != name]
    if args.json:
        print(json.dumps(actors, indent=2))
    else:
        print(format_table(actors, counters))
    return 0


def run_address(args: argparse.Namespace) -> str | None:
    """A run directory (one with ``config.yaml``) given as the address names its broker: the
    address its processes use (``ipc://RUN/bus.sock``, or its ``bus.address``), which replaces
    ``args.address``. Returns the run directory, or None for an address."""
    from pathlib import Path

    run_dir = Path(args.address)
    if "://" in args.address or not (run_dir / "config.yaml").is_file():
        return None
    from arena.run.addresses import bus_address
    from arena.run.config import load_run_config

    args.address = bus_address(load_run_config(run_dir / "config.yaml"), run_dir)
    return str(run_dir)


COLUMNS = ("name", "kind", "host", "services", "endpoint", "version", "load", "heartbeat")


def row(actor: dict[str, Any]) -> tuple[str, ...]:
    """One actor's cells, in :data:`COLUMNS` order."""
    status = actor.get("status") or {}
    version = status.get("policy_version")
    return (
        actor["name"],
        actor["kind"],
        f"{actor['host']}:{actor['pid']}",
        ",".join(actor["services"]) or "-",
        actor.get("endpoint") or "-",
        "-" if version is None else str(version),
        str(status.get("load", "-")),
        f"{actor.get('last_heartbeat', 0.0):.1f}s ago",
    )


def format_table(actors: list[dict[str, Any]], counters: dict[str, int] | None = None) -> str:
    """The table, the actor count, what the trainer says of its run, and the broker's counters
    (``registered`` first: how many registrations it took, restarts included)."""
    rows = [COLUMNS, *(row(a) for a in sorted(actors, key=lambda a: (a["kind"], a["name"])))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"{len(actors)} actors")
    lines += run_state(actors)
    if counters:
        order = sorted(counters, key=lambda k: (k != "registered", k))
        lines.append("broker: " + ", ".join(f"{k} {counters[k]}" for k in order))
    return "\n".join(line.rstrip() for line in lines)


def run_state(actors: list[dict[str, Any]]) -> list[str]:
    """What the trainer of a run (``arena train``) says of it: the leases of its episode jobs
    and the long waits it is in, with their diagnosis (:mod:`arena.run.watch`); and each
    inference actor that serves smaller batches than its ``max_batch``, having run out of
    memory at more (:func:`arena.actors.backend_watch.serve_in_halves`)."""
    lines = []
    for actor in actors:
        status = actor.get("status") or {}
        bound, configured = status.get("max_batch"), (status.get("settings") or {}).get("max_batch")
        if isinstance(bound, int) and isinstance(configured, int) and bound < configured:
            lines.append(
                f"{actor['name']}: batches of at most {bound} requests, not max_batch "
                f"{configured}: out of memory at more"
            )
        leases = status.get("leases")
        if isinstance(leases, dict):
            counts = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in leases.items())
            lines.append(f"{actor['name']}: episode jobs {counts}")
        for line in status.get("waiting") or []:
            lines.append(f"{actor['name']}: {line}")
    return lines
