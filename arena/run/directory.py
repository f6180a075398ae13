"""Who is on the bus: a run's actors as the broker's directory lists them.

A run's actors need not be its own children: through an external broker (``bus.address``),
rollout and inference actors started on other hosts join the run, under names the coordinator
cannot know in advance (``arena rollout --index 7``, ``arena inference`` without
``--actor-name``). So the coordinator never assumes ``rollout-0`` to ``rollout-<N-1>``: it asks
the broker (built-in service ``broker.actors``) who is there, each time it needs to know.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from arena.bus import Actor, BusError

ROLLOUT_SERVICE = "rollout"
_ROLLOUT_NAME = re.compile(r"rollout-(\d+)")


def rollout_index(name: str) -> int | None:
    """The ``I`` of ``rollout-<I>`` (the ``--index`` its process was given), else None."""
    match = _ROLLOUT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def rollout_names(actors: list[dict[str, Any]]) -> list[str]:
    """Names of the rollout actors in a directory listing (named ``rollout-<I>``, serving
    ``rollout``), in index order: a stable order makes the split of a collect reproducible."""
    found = [
        a["name"]
        for a in actors
        if ROLLOUT_SERVICE in a.get("services", ()) and rollout_index(a["name"]) is not None
    ]
    return sorted(found, key=lambda name: rollout_index(name) or 0)


def serving(actors: list[dict[str, Any]], service: str) -> list[str]:
    """Names of the actors in a directory listing that offer ``service``, sorted."""
    return sorted(a["name"] for a in actors if service in a.get("services", ()))


BROKER_WAIT = 120.0
"""Seconds a run waits for a broker that stopped answering to answer again: one that is
restarting, or one that was stopped (the run's own is killed and restarted once silent for
``bus.heartbeat_timeout``, :mod:`arena.run.hangs`), or across a network partition."""


async def listing(
    actor: Actor, timeout: float = 5.0, attempts: int = 4, broker_wait: float = BROKER_WAIT
) -> list[dict[str, Any]]:
    """The broker's directory: one dict per registered actor (name, kind, services, ...).

    Asked again when a request fails or goes unanswered (up to ``attempts`` times): a request
    sent while the broker restarts is lost with it, and asking twice is harmless. A lost broker
    (``broker_lost``) is waited for, up to ``broker_wait`` seconds, before asking again."""
    for attempt in range(attempts):
        try:
            return list((await actor.request(service="broker.actors", timeout=timeout)).body)
        except BusError as err:
            if attempt == attempts - 1:
                raise
            if err.code != "broker_lost":
                await asyncio.sleep(0.5)
            elif not await actor.liveness.broker_back(broker_wait):
                raise
    raise AssertionError("unreachable")


async def rollout_actors(actor: Actor) -> dict[str, float]:
    """The rollout actors on the bus now, in index order: each name with the seconds since the
    broker last heard from it (a collector's proof that an actor reported dead is back)."""
    actors = await listing(actor)
    heard = {a["name"]: float(a.get("last_heartbeat", 0.0)) for a in actors}
    return {name: heard[name] for name in rollout_names(actors)}
