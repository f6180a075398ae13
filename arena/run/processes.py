"""Which processes a run starts: every one an ``arena`` subcommand, the same programs a
multi-host deployment starts by hand.

:func:`actor_commands` lists them (name, command line, environment, whether a crash is restarted)
without starting anything; :func:`start_processes` hands them to a
:class:`~arena.run.launcher.Launcher`. A run starts only what its config asks for: its own
broker when ``bus.address`` is unset (restartable: the actors register again with the new one),
its inference actors unless ``inference.actors`` is 0 (restartable: they load the learner's
current weights when they join): ``inference.actors`` of the shared base, one per named policy
with a model of its own (:mod:`arena.run.bases`) and, in ``population`` mode, the pool actors
that serve past snapshots (:mod:`arena.run.inference_actors` names them all and says what each
serves), the learners unless ``start_learner`` is false (restartable: each resumes from its
last checkpoint, and the run's from that step): the run's own and one per such policy that
trains, and ``rollout.actors`` rollout actors. Whatever it does not start may join from
elsewhere with the same command lines and the files :func:`write_configs` puts in the run
directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from arena.core.config import to_yaml
from arena.run.addresses import bus_address, own_broker
from arena.run.bases import learner_file, own_bases, policy_learner, trained_bases
from arena.run.config import RunConfig
from arena.run.inference_actors import started_inference
from arena.run.launcher import Launcher
from arena.run.resources import cpu_threads
from trainers.config import LearnerConfig


@dataclass(frozen=True)
class ActorCommand:
    """One process of a run."""

    name: str
    """The child's name (its log is ``logs/<name>.log``; actors use it on the bus)."""
    argv: list[str]
    """The ``arena`` command line, without ``arena``."""
    env: dict[str, str] = field(default_factory=dict)
    """Added to the launcher's environment."""
    restartable: bool = False
    """Restarted when it dies or hangs (the run's own broker, inference actors, the learner,
    rollout actors); any other death stops the run."""
    max_restarts: int = 0
    """How many times a restartable one is restarted before its death stops the run."""


def actor_commands(
    config: RunConfig, run_dir: Path, config_dir: Path | None = None
) -> list[ActorCommand]:
    """The broker, the inference actor(s), the learner and the rollout actors that the run in
    ``run_dir`` starts itself, their command lines reading its resolved config at
    ``config_dir/config.yaml`` and the learners' at ``config_dir/learner.yaml`` (see
    :func:`write_configs`). ``config_dir`` is ``run_dir`` unless the files are read from
    elsewhere (``arena deploy k8s`` mounts them at ``/etc/arena/config``); what lives in the
    run directory (adapters, the socket of the run's own broker) is always ``run_dir``'s."""
    c = config
    config_dir = run_dir if config_dir is None else config_dir
    address = bus_address(c, run_dir)
    threads = cpu_threads(c)
    inference_env = {"OMP_NUM_THREADS": str(threads["inference"])} if threads else {}
    learner_env = {"OMP_NUM_THREADS": str(threads["learner"])} if threads else {}
    commands = []
    if own_broker(c, run_dir):
        argv = broker_argv(address, c.bus.heartbeat_interval, c.bus.heartbeat_timeout)
        commands.append(
            ActorCommand("broker", argv, restartable=True, max_restarts=c.bus.max_restarts)
        )
    for actor_name in started_inference(c, run_dir):
        # what it serves is read from config.yaml by the function that named it, as an actor
        # started by hand or by a cluster reads it: one command form wherever it runs, and
        # ``auto`` devices resolved by each actor on its own host
        argv = inference_argv(address, config_dir / "config.yaml", actor_name)
        commands.append(inference_command(actor_name, argv, inference_env, c))
    if c.start_learner:
        for policy in (None, *trained_bases(c.play)):
            commands.append(
                ActorCommand(
                    "learner" if policy is None else f"learner-{policy}",
                    learner_argv(address, config_dir, policy),
                    learner_env,
                    restartable=True,
                    max_restarts=c.learner_max_restarts,
                )
            )
    for index in range(c.rollout.actors):
        argv = [
            "-v",
            "rollout",
            "--address",
            address,
            "--config",
            str(config_dir / "config.yaml"),
            "--index",
            str(index),
        ]
        commands.append(
            ActorCommand(
                f"rollout-{index}", argv, restartable=True, max_restarts=c.rollout.max_restarts
            )
        )
    return commands


def inference_command(
    name: str, argv: list[str], env: dict[str, str], config: RunConfig
) -> ActorCommand:
    """An inference actor: restartable, since it loads the learner's current weights when it
    joins (a hung one is killed and restarted, arena/run/hangs.py)."""
    return ActorCommand(
        name, argv, env, restartable=True, max_restarts=config.inference_max_restarts
    )


def learner_argv(address: str, config_dir: Path, policy: str | None = None) -> list[str]:
    """``arena learner`` with the learner config the run wrote into ``config_dir`` (its run
    directory, or where those files are read from; ``policy``: the learner of a policy with a
    model of its own)."""
    name = [] if policy is None else ["--name", f"learner-{policy}"]
    config = str(config_dir / learner_file(policy))
    return ["-v", "learner", "--address", address, *name, "--config", config]


def policy_learners(config: RunConfig, run_dir: Path) -> dict[str, LearnerConfig]:
    """The learner config of each policy with a learner of its own."""
    bases = own_bases(config.play)
    serve_adapter = config.inference.backend == "hf"
    return {
        name: policy_learner(
            config.learner,
            name,
            bases[name],
            run_dir,
            serve_adapter,
            sampling=config.play.sampling_of(name),
        )
        for name in trained_bases(config.play)
    }


def broker_argv(address: str, heartbeat_interval: float, heartbeat_timeout: float) -> list[str]:
    """``arena broker`` bound to ``address``."""
    return [
        "broker",
        "--bind",
        address,
        "--heartbeat-interval",
        str(heartbeat_interval),
        "--heartbeat-timeout",
        str(heartbeat_timeout),
    ]


def inference_argv(address: str, config_path: Path, actor_name: str | None) -> list[str]:
    """``arena inference`` standing for the run's inference actor ``actor_name`` (None: one more
    of the shared base's), everything it serves read from the run's ``config.yaml`` at
    ``config_path`` by the function that names the run's actors
    (:mod:`arena.run.inference_actors`): the one command line of every inference actor of a
    run, started by ``arena train``, by hand or by a cluster's job, so that no copy of those
    settings in flags can drift from what the run's own actor would serve. Its heartbeat is the
    run's ``bus.heartbeat_interval`` and an ``auto`` device is resolved by the actor itself, on
    its own host."""
    argv = ["-v", "inference", "--address", address, "--config", str(config_path)]
    return argv + (["--actor-name", actor_name] if actor_name is not None else [])


def write_configs(config: RunConfig, run_dir: Path, into: Path | None = None) -> None:
    """The resolved run config as ``config.yaml`` (what ``arena rollout --config`` reads, and
    what ``resume`` restores) and its learner section as ``learner.yaml`` (what ``arena learner
    --config`` reads), and each policy's own learner's, into ``into`` (the run directory
    ``run_dir`` unless given: ``arena deploy k8s`` writes them for a ConfigMap): written before
    anything starts, so that actors started elsewhere can be given them. Every path in them is
    ``run_dir``'s, absolute. Each file appears whole (written aside, then renamed): a process
    started elsewhere that waits for it (``arena deploy slurm``'s steps) never reads half."""
    into = run_dir if into is None else into
    _write_whole(into / "config.yaml", to_yaml(replace(config, resume=None)))
    _write_whole(into / learner_file(None), to_yaml(config.learner))
    for name, learner in policy_learners(config, run_dir).items():
        _write_whole(into / learner_file(name), to_yaml(learner))


def _write_whole(path: Path, text: str) -> None:
    """``text`` into ``path``, which shows either its old content or all of ``text``."""
    aside = path.with_name(f".{path.name}.tmp")
    aside.write_text(text)
    os.replace(aside, path)


def start_processes(launcher: Launcher, commands: Iterable[ActorCommand]) -> None:
    """Start ``commands`` (some of :func:`actor_commands`) under ``launcher``."""
    for command in commands:
        launcher.start(
            command.name,
            command.argv,
            env=command.env,
            restartable=command.restartable,
            max_restarts=command.max_restarts,
        )
