"""An echo actor: replies to every request with its body. For ``bench/bus.py``, tests and for
checking a deployment end to end (``arena echo tcp://broker:5555``)."""

from __future__ import annotations

import asyncio

from arena.bus.actor import Actor


async def serve_echo(
    address: str, name: str, service: str, heartbeat_interval: float, stop: asyncio.Event
) -> None:
    """Serve ``service`` as actor ``name`` until ``stop`` is set."""
    actor = Actor(
        name,
        address,
        kind="echo",
        services={service: lambda msg: msg.body},
        heartbeat_interval=heartbeat_interval,
    )
    await actor.start()
    print(f"echo actor {name} serving {service!r} via {address}", flush=True)
    try:
        await stop.wait()
    finally:
        await actor.close()
