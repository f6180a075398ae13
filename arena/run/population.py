"""Population play: before each step, draw who fills the untrained seats.

With ``opponents.latest_prob`` the opponent is the current policy (frozen for that step);
otherwise a checkpoint drawn from the last ``opponents.pool_size`` (or the initial model),
loaded into the pool inference actor that serves ``policy:pool``.
"""

from __future__ import annotations

import random
from pathlib import Path

from arena.bus import Actor
from arena.models import model_dir
from arena.run.config import RunConfig
from arena.run.processes import POOL
from arena.run.weight_sync import WeightSync


class Population:
    """Chooses the opponent of each step and keeps the pool actor loaded with it."""

    def __init__(self, config: RunConfig, run_dir: Path, actor: Actor, weights: WeightSync) -> None:
        self.config = config
        self.run_dir = run_dir
        self.actor = actor
        self.weights = weights
        self._loaded = "initial"

    async def choose(self, seed: int, version: int) -> dict[str, str] | None:
        """The opponent of the next collect, or None outside population mode."""
        c = self.config.opponents
        if c.mode != "population":
            return None
        rng = random.Random(seed)
        if rng.random() < c.latest_prob:
            return {"policy": self.config.learner.name, "label": f"main@{version}"}
        checkpoints = sorted((self.run_dir / "checkpoints").glob("step-*/model"))[-c.pool_size :]
        pool = [("initial", None), *((p.parent.name, p) for p in checkpoints)]
        label, path = rng.choice(pool)
        if label != self._loaded:
            loaded = int(label.split("-")[1]) if path is not None else 0
            target = str(path) if path is not None else str(model_dir(self.config.model))
            self.actor.send(
                "control",
                {"command": "load", "path": target, "version": loaded},
                dst="inference-pool",
            )
            await self.weights.wait_applied("inference-pool", loaded, exact=True)
            self._loaded = label
        return {"policy": POOL, "label": f"{POOL}@{label}"}
