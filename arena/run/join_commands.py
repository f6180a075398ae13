"""The command lines that start a run's actors by hand, on this host or another: what the
run prints while it waits for them (:mod:`arena.run.roster`) and what ``--dry-run`` says will
join (:mod:`arena.run.plan`), and the broker's where the run connects to one it did not start. Each is the command the run would start itself, with
``--connect`` to its broker and the bus flags this run uses, added in one place
(:func:`hand_command`) so that no kind of actor's line lacks them."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from arena.bus.security import INSECURE_ENV, KEYS_ENV, is_loopback
from arena.run.config import BusConfig, RunConfig
from arena.run.processes import broker_argv, inference_argv, learner_argv


def start_command(
    config: RunConfig,
    run_dir: Path,
    address: str,
    kind: str,
    actor: str | None = None,
    index: int | None = None,
) -> str:
    """The command line that starts one more ``kind`` (``learner``, ``inference``,
    ``rollout``) actor for the run in ``run_dir``, connecting to ``address``. ``actor``: for an
    inference actor, the run's actor it stands for (:mod:`arena.run.inference_actors`; None:
    one more of the shared base's); for a learner, the policy with a model of its own it trains
    (None: the run's own). ``index``: a rollout actor's (None: the first after the run's own)."""
    c = config
    if kind == "learner":
        argv = learner_argv(address, run_dir, actor)
    elif kind == "inference":
        # the run's own settings, from its config (arena/run/inference_settings.py): flags
        # spelled out here would be one more copy of them to drift
        argv = inference_argv(address, run_dir / "config.yaml", actor)
    else:
        config_path = str(run_dir / "config.yaml")
        argv = ["rollout", "--address", address, "--config", config_path]
        argv += ["--index", str(c.rollout.actors if index is None else index)]
    return hand_command(argv)


def broker_hint(address: str, bus: BusConfig) -> str:
    """The command that starts a broker others can reach at ``address``, with this run's bus
    flags and heartbeats (``bus``: a broker's own default timeout is not the run's, and would
    declare its actors dead sooner or later than the run expects): on every interface for
    another host's address, on the address itself for a loopback one (the bus refuses a
    wildcard bind without keys, and a loopback address needs none)."""
    bind = address
    if address.startswith("tcp://") and ":" in address[6:] and not is_loopback(address):
        bind = "tcp://*:" + address.rsplit(":", 1)[1]
    return hand_command(broker_argv(bind, bus.heartbeat_interval, bus.heartbeat_timeout))


def hand_command(argv: list[str]) -> str:
    """``arena ARGV`` as typed on another host: ``--connect`` for ``--address``, no ``-v``, and
    the bus flags this run uses (``--keys DIR``, as ``--keys`` set ``ARENA_KEYS``, or
    ``--insecure``): the one place every printed command gets them."""
    argv = ["--connect" if a == "--address" else a for a in argv if a != "-v"]
    if os.environ.get(KEYS_ENV):
        argv += ["--keys", os.environ[KEYS_ENV]]
    elif os.environ.get(INSECURE_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        argv.append("--insecure")
    return "arena " + shlex.join(argv)


def simulator_command(address: str, policy: str) -> str:
    """The command line of an inference actor serving ``policy:<policy>`` for a simulator: the
    run never starts one, and its model is the user's to name."""
    return hand_command(
        ["inference", "--connect", address, "--name", policy, "--model", "CHECKPOINT_OR_MODEL"]
    )
