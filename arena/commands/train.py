"""``arena train CONFIG [key=value ...] [--dry-run]``: self-play training from a config."""

from __future__ import annotations

import argparse
import sys

HELP = "self-play training from a YAML config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML run config, e.g. configs/selfplay.yaml")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. steps=4 resume=runs/x/y")
    parser.add_argument("--dry-run", action="store_true",
                        help="resolve and validate the config, print the plan, and exit")


def run(args: argparse.Namespace) -> int:
    from arena.config import ConfigError
    from arena.train import train

    try:
        return train(args.config, args.overrides, dry_run=args.dry_run)
    except ConfigError as err:
        print(f"arena train: bad config: {err}", file=sys.stderr)
        return 2
