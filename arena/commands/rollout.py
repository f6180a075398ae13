"""``arena rollout --connect ADDR --config RUN.yaml --index I``: one rollout actor.

It reads the run config (the ``config.yaml`` that ``arena train`` writes into its run
directory, or any run config), serves collect orders as ``rollout-<I>`` and sends every
finished episode to the learner (:mod:`arena.actors.rollout`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments

if TYPE_CHECKING:
    from arena.actors.rollout import RolloutActor
    from arena.run.config import RunConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bus_arguments(parser)
    parser.add_argument(
        "--config", required=True, help="run config (YAML), e.g. runs/x/y/config.yaml"
    )
    parser.add_argument(
        "--index", type=int, default=0, help="this actor's index: its name is rollout-<index>"
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the run config")


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.core.process import serve
    from arena.run.config import load_run_config

    config = load_run_config(args.config, args.overrides)
    serve(rollout_actor(config, args.address, args.index).run)
    return 0


def rollout_actor(config: RunConfig, address: str, index: int) -> RolloutActor:
    """The rollout actor ``rollout-<index>`` that ``config`` describes; its policy requests are
    bounded by the run's ``inference.timeout``, its episodes by ``rollout.max_episode_turns``
    and ``rollout.episode_timeout``."""
    from arena.actors.rollout import RolloutActor
    from arena.run.bases import learner_services

    return RolloutActor(
        config.play,
        address,
        index,
        model=config.model,
        concurrency=config.rollout.concurrency,
        heartbeat_interval=config.bus.heartbeat_interval,
        policy_timeout=config.inference.timeout,
        learners=tuple(learner_services(config.play)),
        max_episode_turns=config.rollout.max_episode_turns,
        episode_timeout=config.rollout.episode_timeout,
    )
