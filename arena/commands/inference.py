"""``arena inference --connect ADDR [--config RUN_DIR/config.yaml] [--model M] ...``: one
inference actor.

It serves one policy as ``policy:<name>`` on the bus, batching requests from every rollout
actor, and applies weight updates between batches (:mod:`arena.actors.inference`). Its flags
are the fields of :class:`arena.policies.config.InferenceConfig`, with the same names and
defaults as the ``inference`` section of a run config (``--max-batch`` is ``max_batch``).

``--config`` reads a run config (the ``config.yaml`` that ``arena train`` writes into its run
directory, as ``arena rollout --config`` does) and serves exactly what the run's own inference
actor named by ``--actor-name`` serves (:mod:`arena.run.inference_actors`, the function
``arena train`` itself uses): ``inference-<N>`` (the default ``inference-0``) the run's
``inference`` section, its ``model``, the learner's policy name and the seed ``seed + N``;
``inference-pool`` and ``inference-pool-<policy>`` the population's past snapshots;
``inference-<policy>`` (or ``--policy NAME``) a policy's own model. A name that is none of the
run's actors is refused, naming them. A flag given beside it overrides that value, and a setting
that then differs from the run's is named in a warning here and, once the actor joins, by the
run (arena/run/inference_settings.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from typing import Any

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from arena.core.config import add_arguments as add_config_arguments
    from arena.policies.config import NOT_FLAGS, InferenceConfig

    add_bus_arguments(parser)
    parser.add_argument(
        "--config",
        default=None,
        metavar="RUN.yaml",
        help="serve as the run's inference actor --actor-name does (default inference-0): its "
        "inference section, model, policy name, adapters and seed (e.g. runs/x/y/config.yaml); "
        "flags given beside it override those",
    )
    parser.add_argument(
        "--policy",
        default=None,
        metavar="NAME",
        help="with --config: serve the run's named policy NAME, one with a model of its own "
        "(policies.NAME.model), as the run's inference-NAME actor does",
    )
    parser.add_argument(
        "--actor-name",
        default=None,
        help="name on the bus (default inference-NAME-PID); with --config it says what to serve: "
        "inference-N, inference-pool, inference-POLICY, inference-pool-POLICY as the run's own "
        "actor of that name, any other name the shared base as inference-0 does",
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=None,
        help="seconds between heartbeats (default: the run's bus.heartbeat_interval with "
        "--config, else 1.0)",
    )
    add_config_arguments(parser, InferenceConfig, exclude=NOT_FLAGS)
    # None marks a flag not given: its value then comes from --config, else the field default
    parser.set_defaults(**{name: None for name in config_flags()})
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="vllm: a keyword argument for vllm.LLM, e.g. max_model_len=2048 (repeatable)",
    )
    parser.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="hf: serve the LoRA adapter in the peft directory PATH as NAME beside the base; a "
        "request picks it with params.adapter (repeatable; refused if made for another base)",
    )


def config_flags() -> list[str]:
    """The fields of :class:`InferenceConfig` that have a flag."""
    from arena.policies.config import NOT_FLAGS, InferenceConfig

    return [f.name for f in dataclasses.fields(InferenceConfig) if f.name not in NOT_FLAGS]


def adapter_assignments(items: list[str]) -> dict[str, str]:
    """``--adapter NAME=PATH`` flags as a mapping; a malformed one is a usage error."""
    from arena.core.errors import ConfigError

    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--adapter takes NAME=PATH, got {item!r}")
        out[name] = path
    return out


def run_served(run: Any, config_path: str, actor_name: str | None, policy: str | None) -> Any:
    """What the run's inference actor ``actor_name`` serves (``inference-0``, the shared base's
    first, when None), or with ``--policy``, its ``inference-<policy>``: one answer with what
    ``arena train`` starts (:func:`arena.run.inference_actors.served_inference`)."""
    from arena.core.errors import ConfigError, did_you_mean
    from arena.run.bases import own_bases
    from arena.run.inference_actors import served_inference
    from arena.run.run_dir import recorded_run_dir

    if policy is not None:
        bases = own_bases(run.play)
        if policy not in bases:
            raise ConfigError(
                f"--policy {policy}: the run has no policy with a model of its own by that name "
                f"({', '.join(bases) or 'none'}){did_you_mean(policy, list(bases))}"
            )
        if actor_name not in (None, f"inference-{policy}"):
            raise ConfigError(
                f"--policy {policy} serves as the run's inference-{policy}, but --actor-name "
                f"names {actor_name}: give one of them"
            )
        actor_name = f"inference-{policy}"
    # the run's directory as its config records it, not the config file's: a copy or a
    # mounted ConfigMap is read elsewhere
    run_dir = recorded_run_dir(run, config_path)
    return served_inference(run, run_dir, actor_name or "inference-0")


def served_config(args: argparse.Namespace) -> tuple[Any, float]:
    """The :class:`InferenceConfig` to serve and the heartbeat interval: the run's (with
    ``--config``) or the defaults, then the flags given. With ``--config``, each flag that
    changes one of the run's shared settings is named in a warning on stderr."""
    from arena.core.config import parse_assignments
    from arena.policies.config import PER_ACTOR, InferenceConfig

    given = {
        name: getattr(args, name) for name in config_flags() if getattr(args, name) is not None
    }
    engine = parse_assignments(args.engine)
    adapters = adapter_assignments(args.adapter)
    if args.config is None:
        if args.policy is not None:
            from arena.core.errors import ConfigError

            raise ConfigError("--policy names a policy of a run: give the run's --config too")
        base, heartbeat = InferenceConfig(), 1.0
    else:
        from arena.run.config import load_run_config
        from arena.run.inference_settings import differences, run_settings

        run = load_run_config(args.config)
        base = run_served(run, args.config, args.actor_name, args.policy)
        heartbeat = run.bus.heartbeat_interval
        changed = {k: v for k, v in given.items() if k not in PER_ACTOR}
        found = differences(
            run_settings(run), {**changed, **({"engine": engine} if engine else {})}
        )
        if found:
            print(
                f"arena inference: warning: serving with settings unlike the run's "
                f"({args.config}): {', '.join(found)}; the run will name this actor too",
                file=sys.stderr,
            )
    config = dataclasses.replace(
        base,
        **given,
        address=args.address,
        engine={**base.engine, **engine},
        adapters={**base.adapters, **adapters},
    )
    if args.heartbeat_interval is not None:
        heartbeat = args.heartbeat_interval
    return config, heartbeat


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.actors.inference import InferenceActor
    from arena.bus.sockets import flush_context
    from arena.core.errors import CannotStart, ConfigError
    from arena.core.process import exit_now, serve
    from arena.core.registry import PluginFailed
    from arena.policies.factory import make_policy
    from arena.policies.types import InvalidRequest

    config, heartbeat_interval = served_config(args)
    try:
        policy = make_policy(config)
    except InvalidRequest as err:  # an unknown backend (naming the nearest), a bad setting
        raise ConfigError(str(err)) from None
    except (ConfigError, CannotStart, PluginFailed):
        raise  # one line naming the key, or the plugin and its error, already
    except Exception as err:
        if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
            raise  # not the model's fault: a restart may find the memory
        # weights cut short, a config.json of garbage, a directory that holds no model: one
        # line (exit 2: started again it would fail the same way), not a loader's traceback
        reason = " ".join(str(err).split()) or "no message"
        raise CannotStart(
            f"cannot load {config.model} on backend {config.backend} "
            f"({type(err).__name__}: {reason[:300]}): it is damaged, or no model this backend "
            "reads"
        ) from None
    actor = InferenceActor(
        policy,
        args.address,
        config,
        actor_name=args.actor_name,
        heartbeat_interval=heartbeat_interval,
    )

    async def main(stop: asyncio.Event) -> None:
        await actor.start()
        print(
            f"arena inference: {actor.actor.name} serves {actor.service} at "
            f"{actor.actor.directory.endpoint or 'the broker only'} (broker {args.address})",
            flush=True,
        )
        try:
            await actor.serving(stop)
        finally:
            await actor.close()

    serve(main)
    # close() answered every request the actor took and closed its sockets. Left to Python,
    # the exit would now join a backend thread stuck in a call (forever, if wedged) and tear
    # down torch, which takes a second or more for nothing; instead send what the closed
    # sockets hold (the unregister, the last replies) and leave at once.
    flush_context()
    if actor.gave_up is not None:  # the last line of its log: what the run names if it stops
        print(f"arena inference: {actor.gave_up}", file=sys.stderr)
    exit_now(1 if actor.wedged or actor.gave_up is not None else 0)
