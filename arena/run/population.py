"""Population play: before each step, draw who fills the untrained seats.

With ``opponents.latest_prob`` the opponent is the current policy (frozen for that step);
otherwise a checkpoint drawn from the last ``opponents.pool_size`` (or the initial model),
loaded into the pool inference actor that serves ``policy:pool``.

With named policies that are adapters on the shared base, the base is frozen, so the pool
actor keeps it and loads the drawn checkpoint's adapters (``step-N/adapters/<name>``, or the
run's starts under ``adapters/<name>`` for the initial model), each under its policy's name:
every opponent seat then plays its own policy's snapshot of that one step
(:meth:`arena.play.seating.SeatFactory.opponent_seat`).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from arena.bus import Actor, BusError
from arena.models import model_dir
from arena.run.bases import shared_adapters
from arena.run.config import RunConfig
from arena.run.processes import POOL, POOL_ACTOR
from arena.run.weight_sync import WeightSync, WeightSyncTimeout

STATUS_TIMEOUT = 10.0
"""Seconds one status request to the pool actor may take."""
STATUS_RETRY = 0.5
"""Seconds between two status requests while the pool actor is away."""


def draw(config: RunConfig, run_dir: Path, seed: int) -> tuple[str, dict[str, Any] | None]:
    """The opponent label drawn with ``seed`` (``latest``, ``initial`` or ``step-N``) and, for
    a past one, the ``load`` control message that makes the pool actor serve it."""
    c = config.opponents
    rng = random.Random(seed)
    if rng.random() < c.latest_prob:
        return "latest", None
    checkpoints = sorted((run_dir / "checkpoints").glob("step-*/model"))[-c.pool_size :]
    pool = [("initial", None), *((p.parent.name, p.parent) for p in checkpoints)]
    label, step_dir = rng.choice(pool)
    version = int(label.split("-")[1]) if step_dir is not None else 0
    adapters = shared_adapters(config.play)
    if adapters:
        where = step_dir / "adapters" if step_dir is not None else run_dir.resolve() / "adapters"
        paths = {name: str(where / name) for name in adapters}
        return label, {"command": "load", "adapters": paths, "version": version}
    path = str(step_dir / "model") if step_dir is not None else str(model_dir(config.model))
    return label, {"command": "load", "path": path, "version": version}


class Population:
    """Chooses the opponent of each step and keeps the pool actor loaded with it.

    What the pool actor serves is asked, not remembered: a pool actor that was restarted since
    the last load serves the initial weights again (version 0), and a collect labelled with the
    step it served before would be mislabelled. A snapshot's version names it (``initial`` 0,
    ``step-N`` N), so the served version tells whether the drawn one must be loaded."""

    def __init__(self, config: RunConfig, run_dir: Path, actor: Actor, weights: WeightSync) -> None:
        self.config = config
        self.run_dir = run_dir
        self.actor = actor
        self.weights = weights

    async def choose(self, seed: int, version: int) -> dict[str, str] | None:
        """The opponent of the next collect, or None outside population mode."""
        if self.config.opponents.mode != "population":
            return None
        label, load = draw(self.config, self.run_dir, seed)
        if load is None:
            return {"policy": self.config.learner.name, "label": f"main@{version}"}
        if await self.served_version() != load["version"]:
            self.actor.send("control", load, dst=POOL_ACTOR)
            await self.weights.wait_applied(POOL_ACTOR, load["version"], exact=True)
        return {"policy": POOL, "label": f"{POOL}@{label}"}

    async def served_version(self) -> int:
        """The version the pool actor serves now, waiting (up to ``wait.weights_timeout``) while
        it is away: a restarting one answers once it serves again."""
        deadline = time.monotonic() + self.config.wait.weights_timeout
        while True:
            try:
                status = await self.actor.request(
                    service=f"policy:{POOL}:status", dst=POOL_ACTOR, timeout=STATUS_TIMEOUT
                )
                return int(status.body["version"])
            except BusError as err:
                if time.monotonic() > deadline:
                    raise WeightSyncTimeout(
                        f"{POOL_ACTOR} did not answer its status in "
                        f"{self.config.wait.weights_timeout:g}s: {err}"
                    ) from err
                await asyncio.sleep(STATUS_RETRY)
