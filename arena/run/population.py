"""Population play: before each step, draw who fills the untrained seats.

With ``opponents.latest_prob`` the opponent is the current policy (frozen for that step);
otherwise one drawn uniformly from the initial model and the last ``opponents.pool_size``
checkpoints on disk (``learner.checkpoint.keep`` prunes older ones: with keep 3 and pool_size 4
the pool is the initial model and 3 checkpoints), loaded into the pool inference actor that
serves ``policy:pool``.

With named policies that are adapters on the shared base, the base is frozen, so the pool
actor keeps it and loads the drawn checkpoint's adapters (``step-N/adapters/<name>``, or the
run's starts under ``adapters/<name>`` for the initial model), each under its policy's name:
every opponent seat then plays its own policy's snapshot of that one step
(:meth:`arena.play.seating.SeatFactory.opponent_seat`).

A trained policy with a model of its own (:mod:`arena.run.bases`) has a pool actor of its own,
``inference-pool-<policy>`` serving ``policy:pool-<policy>`` on its model (started by the run,
:mod:`arena.run.processes`). The one draw of a collect holds for it too: for ``step-N`` it
loads the policy's own checkpoint of the run's step N, ``checkpoints/policies/<policy>/step-N/
model`` (LoRA merged), or, where the policy has none at N (its learner skipped that step, or
its checkpoints were pruned), its newest one before N, else its initial model. Its seats are
labelled with the snapshot they play: ``pool-<policy>@step-M`` (M the step of the checkpoint
loaded) or ``pool-<policy>@initial``; when the draw is the current policy, ``<policy>@V`` with
V its learner's current version, as the shared policy's ``main@V``. A frozen one plays its model
as in any mode.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arena.bus import Actor, BusError
from arena.run.bases import own_bases, policy_checkpoint, pooled_bases, shared_adapters
from arena.run.config import RunConfig
from arena.run.inference_actors import POOL, pool_actor, pool_policy
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
    # the initial model by its spec: the pool actor finds it on its own host
    path = str(step_dir / "model") if step_dir is not None else config.model
    return label, {"command": "load", "path": path, "version": version}


def base_loads(
    config: RunConfig, run_dir: Path, label: str
) -> dict[str, tuple[str, dict[str, Any]]]:
    """For each trained policy with a model of its own, the snapshot it plays when the draw is
    ``label`` (``initial`` or ``step-N``): its label and the ``load`` message that makes its pool
    actor serve it (see the module docstring)."""
    step = 0 if label == "initial" else int(label.split("-")[1])
    out = {}
    for name in pooled_bases(config.play):
        found = policy_checkpoint(run_dir, name, step) if step else None
        if found is None:
            path, version, played = str(own_bases(config.play)[name].model), 0, "initial"
        else:
            path, version, played = str(found[1] / "model"), found[0], found[1].name
        load = {"command": "load", "path": path, "version": version}
        out[name] = (f"{pool_policy(name)}@{played}", load)
    return out


def opponent(policy: str, label: str, own: dict[str, dict[str, str]]) -> dict[str, Any]:
    """An opponent as a collect's orders carry it (:class:`arena.play.seating.Opponent`);
    ``own`` only where there are policies with models of their own to seat."""
    return {"policy": policy, "label": label, **({"own": own} if own else {})}


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

    async def choose(
        self, seed: int, version: int, versions: Mapping[str, int] | None = None
    ) -> dict[str, Any] | None:
        """The opponent of the next collect, or None outside population mode: the policy the
        shared base's seats play and its label, and under ``own`` the same for each trained
        policy with a model of its own (``versions``: their learners' current versions)."""
        if self.config.opponents.mode != "population":
            return None
        label, load = draw(self.config, self.run_dir, seed)
        if load is None:
            own = {
                name: {"policy": name, "label": f"{name}@{(versions or {}).get(name, 0)}"}
                for name in pooled_bases(self.config.play)
            }
            return opponent(self.config.learner.name, f"main@{version}", own)
        loads = {None: (f"{POOL}@{label}", load), **base_loads(self.config, self.run_dir, label)}
        sent = []
        for name, (_, message) in loads.items():
            if await self.served_version(name) != message["version"]:
                # no await from expect() to send(): the acknowledgement may come at once
                self.weights.expect(pool_actor(name))
                self.actor.send("control", message, dst=pool_actor(name))
                sent.append((pool_actor(name), message["version"]))
        await asyncio.gather(
            *(self.weights.wait_applied(actor, v, exact=True) for actor, v in sent)
        )
        own = {
            name: {"policy": pool_policy(name), "label": played}
            for name, (played, _) in loads.items()
            if name is not None
        }
        return opponent(POOL, f"{POOL}@{label}", own)

    async def served_version(self, name: str | None = None) -> int:
        """The version the pool actor of ``name`` (None: the shared base's) serves now, waiting
        (up to ``wait.weights_timeout``) while it is away: a restarting one answers once it
        serves again."""
        actor = pool_actor(name)
        deadline = time.monotonic() + self.config.wait.weights_timeout
        while True:
            try:
                status = await self.actor.request(
                    service=f"policy:{pool_policy(name)}:status", dst=actor, timeout=STATUS_TIMEOUT
                )
                return int(status.body["version"])
            except BusError as err:
                if time.monotonic() > deadline:
                    raise WeightSyncTimeout(
                        f"{actor} did not answer its status in "
                        f"{self.config.wait.weights_timeout:g}s: {err}"
                    ) from err
                await asyncio.sleep(STATUS_RETRY)
