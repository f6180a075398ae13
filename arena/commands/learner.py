"""``arena learner --connect ADDR [--config LEARNER.yaml] [key=value ...]``: the learner actor.

It trains the shared policy on the episodes sent to service ``learner`` and publishes every new
version's weights (:mod:`trainers.learner_actor`). The config is a
:class:`trainers.config.LearnerConfig` (YAML, then ``key=value`` overrides such as
``optim.lr=1e-5``). Under ``torchrun`` every rank runs this command; rank 0 serves the bus and
the others follow its collective calls::

    torchrun --nproc-per-node 4 -m arena learner --connect tcp://host:5555 --keys DIR --config l.yaml
"""

from __future__ import annotations

import argparse

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bus_arguments(parser)
    parser.add_argument("--name", default="learner", help="actor name on the bus (default learner)")
    parser.add_argument("--config", help="YAML file with LearnerConfig fields")
    parser.add_argument(
        "--weight-transport",
        choices=["shm", "bus"],
        default="shm",
        help="shm: same-host receivers map a shared-memory file (default); bus: bytes in the buckets",
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. optim.lr=1e-5")


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.core.config import load_config
    from arena.core.process import serve
    from trainers.config import LearnerConfig
    from trainers.learner import Learner
    from trainers.learner_actor import LearnerActor

    learner = Learner(load_config(LearnerConfig, args.config, args.overrides))
    if not learner.dist.is_main:
        learner.follow()
        return 0
    actor = LearnerActor(
        learner, args.address, args.name, shm_weights=args.weight_transport == "shm"
    )
    serve(actor.run)
    return 0
