"""What an ``arena inference`` command line serves, worked out by the code the command runs:
the tests of a run's processes and of ``arena deploy`` compare command lines by it."""

from __future__ import annotations

import argparse

from arena.commands import inference as inference_command
from arena.core.config import from_arguments, parse_assignments
from arena.policies.config import InferenceConfig


def served_by(argv: list[str]) -> InferenceConfig:
    """What ``arena inference`` serves, given its command line: a run's (``-v inference ...``,
    as :func:`arena.run.processes.actor_commands` gives it) or the part after ``inference``.
    With ``--config`` the run's config.yaml must exist
    (:func:`~arena.run.processes.write_configs`)."""
    if argv[:2] == ["-v", "inference"]:
        argv = argv[2:]
    parser = argparse.ArgumentParser()
    inference_command.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.config is not None:
        return inference_command.served_config(args)[0]
    return from_arguments(
        InferenceConfig,
        args,
        address=args.address,
        engine=parse_assignments(args.engine),
        adapters=inference_command.adapter_assignments(args.adapter),
    )
