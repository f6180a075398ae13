"""The actors a run waits for before it starts, and the commands that start the missing ones.

A run needs the learner (and each policy's own), ``wait.inference_actors`` inference actors
serving ``policy:<learner.name>``, the run's other inference actors
(:func:`arena.run.inference_actors.named_inference`: one serving ``policy:<policy>`` for each
policy with a model of its own, and in population mode the pool actors ``inference-pool`` and
``inference-pool-<policy>``, by those names), an inference actor for every other policy a
simulator talks through (``simulators.<seat>.policy``: the run never starts those) and
``wait.rollout_actors`` rollout actors. A pool actor is not counted among
``wait.inference_actors``: it serves ``policy:pool``, not ``policy:<learner.name>``. They may be
its own children or processes started elsewhere that joined through an external broker; the
broker's directory (:mod:`arena.run.directory`) says which are there.
When some are missing, the run prints the exact command line that starts each kind (the one a
run would start itself, with ``--connect`` to its broker; an inference actor's reads the run's
``config.yaml`` with ``--config`` instead of spelling its settings out as flags, and names the
run's actor it stands for with ``--actor-name`` where it is one of the named ones), so a
hand-started deployment never has to guess a flag.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena.bus import Actor
from arena.run.bases import learner_service, pooled_bases, trained_bases
from arena.run.config import RunConfig
from arena.run.directory import listing, rollout_index, rollout_names, serving
from arena.run.inference_actors import MAIN_ACTOR, named_inference, pool_actor
from arena.run.join_commands import simulator_command, start_command
from arena.run.plan import simulator_policies


class ActorsMissing(TimeoutError):
    """The actors a run waits for (``wait.*``, the learner) were not all on the bus in time."""


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
            command = start_command(c, run_dir, address, "learner", name)
            out.append(f"the learner of policy {name}: {command}")
    pools = {pool_actor(): "the shared base's past snapshots"}
    pools.update(
        {pool_actor(n): f"past snapshots of {n}'s own model" for n in pooled_bases(c.play)}
    )
    for name, served in named_inference(c, run_dir).items():
        found = serving(actors, f"policy:{served.name}")
        # a pool actor by its name too: the coordinator tells it by name what to load
        if not found or (name in pools and name not in found):
            what = pools.get(name, f"{served.name}'s own model")
            command = start_command(c, run_dir, address, "inference", name)
            out.append(f"{name} serving policy:{served.name} ({what}): {command}")
    for name, seats in simulator_policies(c).items():
        if not serving(actors, f"policy:{name}"):
            out.append(
                f"an inference actor serving policy:{name} (the simulator of {', '.join(seats)}): "
                + simulator_command(address, name)
            )
    present = rollout_names(actors)
    lacking = rollout - len(present)
    # a line each, with an index of its own: two actors of one index would fight over its name
    for index in free_indices(c.rollout.actors, present, lacking):
        command = start_command(c, run_dir, address, "rollout", index=index)
        out.append(f"rollout-{index} (of {lacking} more rollout actor(s), of {rollout}): {command}")
    return out


def inference_command(
    config: RunConfig, run_dir: Path, address: str, name: str, service: str
) -> str | None:
    """The command that starts again the inference actor ``name``, which served ``service``
    (``policy:<policy>``), as the run waits for one (:func:`missing`): under its own name where
    it is one of the run's (``inference-<N>``, a pool or named policy's actor), else one more of
    the policy's; None where the run uses no such policy (the actor was none of its)."""
    c = config
    policy = service.removeprefix("policy:")
    named = named_inference(c, run_dir)
    if name in named and named[name].name == policy:
        return start_command(c, run_dir, address, "inference", name)
    for actor, served in named.items():  # the run's actor of that policy, under another name
        if served.name == policy:
            return start_command(c, run_dir, address, "inference", actor)
    if policy == c.learner.name:
        own = name if MAIN_ACTOR.fullmatch(name) else None
        return start_command(c, run_dir, address, "inference", own)
    if policy in simulator_policies(c):
        return simulator_command(address, policy)
    return None


def free_indices(first: int, present: list[str], count: int) -> list[int]:
    """``count`` rollout indices from ``first`` on (those below are the run's own actors') that
    no actor on the bus (``present``, their names) has."""
    taken = {rollout_index(name) for name in present}
    free: list[int] = []
    index = first
    while len(free) < count:
        if index not in taken:
            free.append(index)
        index += 1
    return free


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
