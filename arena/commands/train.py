"""``arena train CONFIG [key=value ...] [--dry-run]``: self-play training from a config.

A run starts a broker, the inference actor(s), the learner and the rollout actors as local
processes (each one an ``arena`` subcommand, logged to ``<run dir>/logs/``), trains for
``steps`` learner steps, evaluates before and after, and writes everything under
``<output_dir>/<name>/<time>/``. ``resume=<run dir>`` continues a killed run from its last
checkpoint.

Overrides and flags may come in any order (``arena train CFG --dry-run steps=3``). A bad config
exits with code 2 and a message that names the key and its nearest valid name.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML run config, e.g. configs/selfplay.yaml")
    parser.add_argument(
        "overrides", nargs="*", help="key=value overrides, e.g. steps=4 resume=runs/x/y"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="resolve and validate the config, print the plan, and exit",
    )


def run(args: argparse.Namespace) -> int:
    from arena.run.coordinator import train

    return train(args.config, args.overrides, dry_run=args.dry_run)
