"""``arena train CONFIG [key=value ...] [--dry-run] [--keys DIR]``: self-play training from a config.

A run starts a broker, the inference actor(s), the learner and the rollout actors as local
processes (each one an ``arena`` subcommand, logged to ``<run dir>/logs/``), trains for
``steps`` learner steps, evaluates before and after, and writes everything under
``<output_dir>/<name>/<time>/``. ``resume=<run dir>`` continues a killed run from its last
checkpoint.

With ``bus.address=tcp://HOST:PORT`` it starts no broker: it connects to the one already running
there (``arena broker --bind tcp://*:PORT``) and fails within ``bus.connect_timeout`` seconds if
none answers. ``rollout.actors``, ``inference.actors`` and ``start_learner`` say what it starts
itself (each may be 0 or false); actors started elsewhere with ``--connect`` join the run, and
it waits for ``wait.*`` of them. It writes ``config.yaml`` and ``learner.yaml`` into the run
directory (printed first) before anything starts: ``arena rollout --config`` and ``arena
learner --config`` take them. ``--keys DIR`` (``ARENA_KEYS``) and ``--insecure`` are those of
every bus command, and pass on to the processes it starts.

Overrides and flags may come in any order (``arena train CFG --dry-run steps=3``). A bad config
exits with code 2 and a message that names the key and its nearest valid name.
"""

from __future__ import annotations

import argparse

from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML run config, e.g. configs/selfplay.yaml")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="key=value overrides, e.g. steps=4 resume=runs/x/y bus.address=tcp://host:5555",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="resolve and validate the config, print the plan, and exit",
    )
    add_bus_arguments(parser, connect=False)


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.run.coordinator import train

    return train(args.config, args.overrides, dry_run=args.dry_run)
