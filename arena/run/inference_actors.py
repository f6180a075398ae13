"""A run's inference actors by name, and what each serves: the one answer for ``arena train``
(which starts them, :mod:`arena.run.processes`) and for ``arena inference --config
RUN/config.yaml --actor-name NAME`` (which starts one by hand, on any host), so that a
hand-started actor serves exactly what the run's own would.

A run's inference actors, each ``policy:<policy name>`` on the bus:

- ``inference-<N>``: the shared ``model`` as ``policy:<learner.name>``, with the run's adapters
  (seed ``seed + N``). The run starts ``inference-0`` to ``inference-<inference.actors - 1>``;
  more may join under other indexes.
- ``inference-pool`` (``population`` mode): past snapshots of the shared base as ``policy:pool``,
  with the named policies' adapters on it and none by default (seed ``seed + 99``,
  :mod:`arena.run.population`).
- ``inference-<policy>`` for each named policy with a model of its own (:mod:`arena.run.bases`),
  ``policy:<policy>`` on that model (seed ``seed + 100 + i``).
- ``inference-pool-<policy>`` for each such policy that trains, in ``population`` mode:
  ``policy:pool-<policy>`` on its model (seed ``seed + 200 + i``).

``inference.actors`` says whether the run starts them: with 1 or more it starts all of them;
with 0 it starts none (as ``start_learner: false`` starts no learner, the policies' own
included), and waits for each of them to join from elsewhere (:mod:`arena.run.roster`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from arena.core.errors import ConfigError, did_you_mean, nearest
from arena.models.adapter_shape import SHARED_ADAPTER
from arena.play.config import PolicySpec
from arena.policies.config import InferenceConfig
from arena.run.bases import own_bases, policy_adapter_dir, pooled_bases, shared_adapters
from arena.run.config import RunConfig

POOL = "pool"
"""Policy name of the population opponents' inference actor."""
POOL_ACTOR = "inference-pool"
"""The inference actor that serves :data:`POOL`."""
POOL_SEED = 99
"""Added to the run's seed for the pool actor's (own bases: 100 + i, their pools: 200 + i)."""
MAIN_ACTOR = re.compile(r"inference-(\d+)")
"""The name of one of the shared base's inference actors, ``inference-<N>``."""


def pool_policy(name: str | None = None) -> str:
    """The policy name under which population opponents play past snapshots: :data:`POOL` for
    the shared base, ``pool-<name>`` for ``name``, a trained policy with a model of its own
    (a policy's name is an identifier, so it never has the dash)."""
    return POOL if name is None else f"{POOL}-{name}"


def pool_actor(name: str | None = None) -> str:
    """The inference actor that serves :func:`pool_policy` (``inference-pool[-<name>]``)."""
    return f"inference-{pool_policy(name)}"


def main_inference(config: RunConfig, index: int) -> InferenceConfig:
    """What ``inference-<index>`` serves: the shared model as ``policy:<learner.name>``."""
    return replace(
        config.inference, name=config.learner.name, model=config.model, seed=config.seed + index
    )


def pool_adapters(config: RunConfig) -> dict[str, str]:
    """What the pool actor serves beside the base: the named policies' adapters on the shared
    base, from their starts (each collect then loads the drawn checkpoint's); none without."""
    names = shared_adapters(config.play)
    return {name: path for name, path in config.inference.adapters.items() if name in names}


def shared_pool_inference(config: RunConfig) -> InferenceConfig:
    """What ``inference-pool`` serves: the shared model as ``policy:pool``, with the named
    policies' adapters and no default one: it plays past checkpoints' merged ``model/``
    directories, or their named policies' ``adapters/`` on the frozen base."""
    return replace(
        config.inference,
        name=POOL,
        model=config.model,
        seed=config.seed + POOL_SEED,
        adapters=pool_adapters(config),
        default_adapter="",
    )


def base_inference(
    config: RunConfig, run_dir: Path, name: str, spec: PolicySpec, seed: int
) -> InferenceConfig:
    """What the inference actors of ``name``, a policy with a model of its own, serve: its
    model as ``policy:<name>``, with its fresh adapter by default where it trains one unmerged."""
    c = config
    adapters, default = {}, ""
    if spec.train and spec.lora is not None and c.inference.backend == "hf":
        adapters = {SHARED_ADAPTER: str(policy_adapter_dir(run_dir, name) / SHARED_ADAPTER)}
        default = SHARED_ADAPTER
    return replace(
        c.inference,
        name=name,
        model=str(spec.model),
        seed=seed,
        adapters=adapters,
        default_adapter=default,
    )


def pool_inference(config: RunConfig, name: str, spec: PolicySpec, seed: int) -> InferenceConfig:
    """What ``inference-pool-<name>`` serves: ``name``'s model as ``policy:pool-<name>``, with
    no adapter: each collect loads a checkpoint's ``model/`` (LoRA merged) or the model itself
    (arena/run/population.py)."""
    return replace(
        config.inference,
        name=pool_policy(name),
        model=str(spec.model),
        seed=seed,
        adapters={},
        default_adapter="",
    )


def named_inference(config: RunConfig, run_dir: Path) -> dict[str, InferenceConfig]:
    """The run's inference actors other than ``inference-<N>``, by name, each with what it
    serves: ``inference-pool``, then ``inference-<policy>`` and ``inference-pool-<policy>``."""
    c = config
    out = {}
    if c.opponents.mode == "population":
        out[POOL_ACTOR] = shared_pool_inference(c)
    bases = own_bases(c.play)
    for offset, (name, spec) in enumerate(bases.items()):
        out[f"inference-{name}"] = base_inference(c, run_dir, name, spec, c.seed + 100 + offset)
    for offset, name in enumerate(pooled_bases(c.play)):
        out[pool_actor(name)] = pool_inference(c, name, bases[name], c.seed + 200 + offset)
    return out


def started_inference(config: RunConfig, run_dir: Path) -> dict[str, InferenceConfig]:
    """The inference actors ``arena train`` starts itself, by name, with what each serves:
    every one of the run's with ``inference.actors`` >= 1, none with 0 (see the module
    docstring). ``device`` is left as the config says (``auto`` unresolved)."""
    count = config.inference.actors
    if count == 0:
        return {}
    main = {f"inference-{i}": main_inference(config, i) for i in range(count)}
    return {**main, **named_inference(config, run_dir)}


TYPO = 0.85
"""Similarity (difflib's ratio) to one of the run's named inference actors above which another
name is taken for a typo of it and refused: ``inference-poll`` (0.93 to ``inference-pool``)."""


def served_inference(config: RunConfig, run_dir: Path, actor_name: str) -> InferenceConfig:
    """What the run's inference actor ``actor_name`` serves (``run_dir`` holds its
    ``config.yaml``): ``inference-<N>`` the shared base with seed + N, a pool or named
    policy's actor what the run's own of that name serves, and any other name an extra actor
    of the shared base, as ``inference-0`` (more may join a run at any time, under names of
    their own). A name that looks like a typo of a named one is a config error naming them."""
    match = MAIN_ACTOR.fullmatch(actor_name)
    if match:
        return main_inference(config, int(match.group(1)))
    named = named_inference(config, run_dir)
    if actor_name in named:
        return named[actor_name]
    if nearest(actor_name, named, cutoff=TYPO):
        raise ConfigError(
            f"--actor-name {actor_name}: the run has no inference actor by that name; its "
            f"inference actors are {', '.join(['inference-<N>', *named])}"
            + did_you_mean(actor_name, list(named), cutoff=TYPO)
        )
    return main_inference(config, 0)
