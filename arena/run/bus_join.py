"""The run's ``trainer`` joining the bus: waiting for the run's own broker while it starts, or
saying how to start one where an external one does not answer."""

from __future__ import annotations

import time

from arena.bus import Actor, BusError
from arena.bus.security import keys_hint
from arena.run.config import BusConfig
from arena.run.join_commands import broker_hint


class NoBroker(RuntimeError):
    """No broker answered at the run's ``bus.address``."""


OWN_BROKER_WAIT = 120.0
"""Seconds the trainer waits for the run's own broker to answer: it is a process just started."""


async def join_bus(actor: Actor, bus: BusConfig, own: bool) -> None:
    """Start ``actor`` (the run's ``trainer``, subscribed already) on its broker, trying again
    until it answers. The run's ``own`` broker may take a while to start; an external one must
    answer within ``bus.connect_timeout``, else :class:`NoBroker`, saying how to start one
    there."""
    timeout = OWN_BROKER_WAIT if own else bus.connect_timeout
    deadline = time.monotonic() + timeout
    while True:
        try:
            await actor.start(timeout=max(1.0, min(5.0, deadline - time.monotonic())))
            return
        except BusError as err:
            await actor.close()
            if time.monotonic() < deadline:
                continue
            if own:
                raise
            raise NoBroker(
                f"no broker answered at bus.address={actor.address} within {timeout:g}s ({err}). "
                f"Start one there first: `{broker_hint(actor.address, bus)}` (on the broker's "
                "host), or leave bus.address unset to let arena train start its own"
                + keys_hint(actor.address)
            ) from None
