"""``arena inference --connect ADDR [--model M] [--name N] ...``: one inference actor.

It serves one policy as ``policy:<name>`` on the bus, batching requests from every rollout
actor, and applies weight updates between batches (:mod:`arena.actors.inference`). Its flags
are the fields of :class:`arena.policies.config.InferenceConfig`, with the same names and
defaults as the ``inference`` section of a run config (``--max-batch`` is ``max_batch``).
"""

from __future__ import annotations

import argparse
import asyncio

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from arena.core.config import add_arguments as add_config_arguments
    from arena.policies.config import NOT_FLAGS, InferenceConfig

    add_bus_arguments(parser)
    parser.add_argument(
        "--actor-name", default=None, help="name on the bus (default inference-NAME-PID)"
    )
    parser.add_argument(
        "--heartbeat-interval", type=float, default=1.0, help="seconds between heartbeats"
    )
    add_config_arguments(parser, InferenceConfig, exclude=NOT_FLAGS)
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="vllm: a keyword argument for vllm.LLM, e.g. max_model_len=2048 (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.actors.inference import InferenceActor
    from arena.core.config import from_arguments, parse_assignments
    from arena.core.process import serve
    from arena.policies.config import InferenceConfig
    from arena.policies.factory import make_policy

    engine = parse_assignments(args.engine)
    config = from_arguments(InferenceConfig, args, address=args.address, engine=engine)
    policy = make_policy(config)
    actor = InferenceActor(
        policy,
        args.address,
        config,
        actor_name=args.actor_name,
        heartbeat_interval=args.heartbeat_interval,
    )

    async def main(stop: asyncio.Event) -> None:
        await actor.start()
        print(
            f"arena inference: {actor.actor.name} serves {actor.service} at "
            f"{actor.actor.directory.endpoint or 'the broker only'} (broker {args.address})",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            await actor.close()

    serve(main)
    return 0
