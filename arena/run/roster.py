"""The actors a run waits for before it starts, and the commands that start the missing ones.

A run needs the learner, ``wait.inference_actors`` inference actors serving
``policy:<learner.name>`` (plus ``policy:pool`` in population mode, and ``policy:pool-<policy>``
for each trained policy with a model of its own there), an inference actor for
every other policy a simulator talks through (``simulators.<seat>.policy``: the run never starts
those) and ``wait.rollout_actors`` rollout actors. They may be its own children or processes started elsewhere that joined through
an external broker; the broker's directory (:mod:`arena.run.directory`) says which are there.
When some are missing, the run prints the exact command line that starts each kind (the one a
run would start itself, with ``--connect`` to its broker; an inference actor's reads the run's
``config.yaml`` with ``--config`` instead of spelling its settings out as flags), so a
hand-started deployment never has to guess a flag.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena.bus import Actor
from arena.bus.security import INSECURE_ENV, KEYS_ENV
from arena.run.bases import learner_service, own_bases, pooled_bases, trained_bases
from arena.run.config import RunConfig
from arena.run.directory import listing, rollout_names, serving
from arena.run.plan import simulator_policies
from arena.run.processes import POOL, learner_argv, pool_policy


class ActorsMissing(TimeoutError):
    """The actors a run waits for (``wait.*``, the learner) were not all on the bus in time."""


def start_command(config: RunConfig, run_dir: Path, address: str, kind: str) -> str:
    """The command line that starts one more ``kind`` (``learner``, ``inference``,
    ``rollout``) actor for the run in ``run_dir``, connecting to ``address``."""
    c = config
    if kind == "learner":
        argv = learner_argv(address, run_dir)
    elif kind == "inference":
        # the run's own settings, from its config (arena/run/inference_settings.py): flags
        # spelled out here would be one more copy of them to drift
        argv = ["inference", "--address", address, "--config", str(run_dir / "config.yaml")]
    else:
        config_path = str(run_dir / "config.yaml")
        argv = ["rollout", "--address", address, "--config", config_path]
        argv += ["--index", str(c.rollout.actors)]
    argv = ["--connect" if a == "--address" else a for a in argv if a != "-v"]
    # the keys this run uses (--keys sets ARENA_KEYS), or the permission to go without
    if os.environ.get(KEYS_ENV):
        argv += ["--keys", os.environ[KEYS_ENV]]
    elif os.environ.get(INSECURE_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        argv.append("--insecure")
    return "arena " + shlex.join(argv)


def missing(
    config: RunConfig, actors: list[dict[str, Any]], run_dir: Path, address: str
) -> list[str]:
    """What the run still waits for, given the broker's directory ``actors``: one line per
    kind, with the command that starts one; empty when the run can start."""
    c = config
    rollout, inference = c.awaited()
    policy = f"policy:{c.learner.name}"
    out = []
    if not serving(actors, "learner"):
        out.append(f"the learner: {start_command(c, run_dir, address, 'learner')}")
    found = len(serving(actors, policy))
    if found < inference:
        out.append(
            f"{inference - found} more inference actor(s) serving {policy} (of {inference}): "
            + start_command(c, run_dir, address, "inference")
        )
    for name in trained_bases(c.play):
        if not serving(actors, learner_service(name)):
            out.append(
                f"the learner of policy {name}: arena "
                + shlex.join(learner_argv(address, run_dir, name)[1:])
            )
    for name in own_bases(c.play):
        if not serving(actors, f"policy:{name}"):
            out.append(
                f"an inference actor serving policy:{name} (its own model): arena inference "
                f"--connect {address} --config {run_dir / 'config.yaml'} --policy {name}"
            )
    if c.opponents.mode == "population" and not serving(actors, f"policy:{POOL}"):
        out.append(f"the population's inference actor serving policy:{POOL}")
    for name in pooled_bases(c.play):
        if not serving(actors, f"policy:{pool_policy(name)}"):
            out.append(
                f"the population's inference actor serving policy:{pool_policy(name)} (past "
                f"snapshots of {name}'s own model)"
            )
    for name, seats in simulator_policies(c).items():
        if not serving(actors, f"policy:{name}"):
            out.append(
                f"an inference actor serving policy:{name} (the simulator of {', '.join(seats)}): "
                f"arena inference --connect {address} --name {name} --model CHECKPOINT_OR_MODEL"
            )
    found = len(rollout_names(actors))
    if found < rollout:
        out.append(
            f"{rollout - found} more rollout actor(s) (of {rollout}): "
            + start_command(c, run_dir, address, "rollout")
        )
    return out


def expects_others(config: RunConfig) -> bool:
    """Whether the run waits for actors it does not start itself."""
    c = config
    rollout, inference = c.awaited()
    return (
        not c.start_learner
        or rollout > c.rollout.actors
        or inference > c.inference.actors
        or bool(simulator_policies(c))
    )


async def wait_for_actors(
    actor: Actor,
    config: RunConfig,
    run_dir: Path,
    address: str,
    say: Callable[[str], None],
) -> None:
    """Until every actor the run needs is on the bus; after ``wait.timeout`` seconds, raise
    :class:`ActorsMissing` naming what is missing. When the run waits for actors it does not
    start, ``say`` is told once what it waits for and how to start each."""
    timeout = config.wait.timeout
    deadline = time.monotonic() + timeout
    announced = False
    while True:
        lacking = missing(config, await listing(actor), run_dir, address)
        if not lacking:
            return
        if not announced and expects_others(config):
            say(
                f"waiting up to {timeout:g}s for actors to join at {address}:\n  "
                + "\n  ".join(lacking)
            )
            announced = True
        if time.monotonic() > deadline:
            raise ActorsMissing(
                f"actors never came up in {timeout:g}s (wait.timeout); still missing:\n  "
                + "\n  ".join(lacking)
            )
        await asyncio.sleep(0.5)
