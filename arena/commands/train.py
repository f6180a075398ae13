"""``arena train CONFIG [key=value ...] [--dry-run] [--keys DIR]``: self-play training from a config.

A run starts a broker, the inference actor(s), the learner and the rollout actors as local
processes (each one an ``arena`` subcommand, logged to ``<run dir>/logs/``), trains for
``steps`` learner steps, evaluates before and after, and writes everything under
``<output_dir>/<name>/<time>/``.

``resume=RUN`` continues the run in directory RUN from its last checkpoint, with the config it
ran with (RUN/config.yaml): the CONFIG argument is not used then, and may be left out
(``arena train resume=RUN steps=8``). The other overrides go on
top of that saved config and each change is printed (``steps: 4 -> 8``), so ``resume=RUN
steps=8`` extends a run; an override of what cannot change mid-run (the model, the games, the
named policies, the adapters' shape ``learner.lora``, ``learner.name``, the seed) is refused
naming it (exit 2). A run that finished says ``already complete at step N`` and exits 0,
unless ``steps`` was raised past N.

``key=value`` merges a mapping into the one already there, as a YAML layer does;
``key:=value`` replaces it (``games.0.simulators.user.kwargs:={}`` leaves no kwargs);
``key={}`` over a non-empty mapping changes nothing and is refused. Changing an id (``id``,
``role``, ``bot``) drops the arguments the files gave the old one (``kwargs``,
``role_kwargs``, ``bot_kwargs``); those given on the same command line are the new one's.
Every game, role and simulator is built once with its arguments before anything starts (and
by ``--dry-run``), so a bad argument fails there in one line naming the game and seat.

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
    parser.add_argument(
        "config",
        help="YAML run config, e.g. configs/selfplay.yaml; with resume=RUN it may be left out "
        "(the run's saved config.yaml is used)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="key=value overrides, e.g. steps=4 resume=runs/x/y bus.address=tcp://host:5555; "
        "key:=value replaces a mapping instead of merging into it",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="resolve and validate the config, print the plan, and exit",
    )
    add_bus_arguments(parser, connect=False)


def run(args: argparse.Namespace) -> int:
    apply_bus_arguments(args)
    from arena.run.prepare import prepare  # no torch: a dry run or a bad config answers at once

    config = prepare(*config_and_overrides(args.config, args.overrides))
    if config is None:
        return 0
    if args.dry_run:
        from arena.run.plan import plan

        print(plan(config))
        return 0
    from arena.run.train import train

    return train(config)


def config_and_overrides(config: str, overrides: list[str]) -> tuple[str | None, list[str]]:
    """``arena train resume=RUN [key=value ...]`` needs no CONFIG: the run's saved config.yaml
    is the one it continues. Any other command line whose first word is an override lacks
    its CONFIG, and says so rather than look for a file named ``steps=3``."""
    from pathlib import Path

    from arena.core.errors import ConfigError

    if "=" not in config or Path(config).exists():
        return config, overrides
    words = [config, *overrides]
    resume = [w.partition("=")[2] for w in words if w.partition("=")[0].strip(": ") == "resume"]
    if not resume:
        raise ConfigError(
            f"{config!r} is an override, but the first argument is the run's CONFIG file: "
            f"arena train CONFIG [key=value ...], e.g. arena train configs/smoke.yaml {config}"
        )
    saved = Path(resume[-1]) / "config.yaml"
    # none there: the defaults, so that resume= itself says what the directory is
    return (str(saved) if saved.is_file() else None), words
