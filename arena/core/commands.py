"""The registry of ``arena`` subcommands: the built-in ones, and plugins' through the entry-point
group ``arena.commands``.

An entry's factory is the name of the command's module (``arena.commands.<name with _>``;
a plugin's entry point value is its module too, with no ``:Factory``), imported only when the
command runs; ``help`` is its one line in ``arena --help`` (a plugin's entry point carries no
help: its line is the first line of its module's docstring, read only when ``arena --help`` is
printed, see :func:`summary`). It lives here, below every other layer, so that the CLI
(:mod:`arena.cli`) builds its parser from it and ``arena plugins`` lists it beside the other
registries; :func:`load` is the one check that a command can run, for both.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from arena.core.registry import Registry, RegistryError

commands: Registry[object] = Registry("command", "arena.commands", versioned=False)
"""Subcommand name -> the name of its module; ``help`` is its one line in ``arena --help``."""
for _name, _help in {
    "train": "self-play training from a YAML config (arena train configs/selfplay.yaml)",
    "broker": "run the message broker that every actor connects to",
    "inference": "run an inference actor: serve a policy to rollout actors, take weight updates",
    "rollout": "run a rollout actor: play episodes and send them to the learner",
    "learner": "run the learner actor: train on episodes, publish weights, save checkpoints",
    "echo": "run an echo actor (for benchmarks and for checking a deployment)",
    "ping": "send requests through a broker to its echo service and print the round trips",
    "games": "list the registered games: id, seats, kind, information, strongest bot",
    "plugins": "list every registry (games, bots, roles, simulators, policy backends, commands): "
    "each entry, the plugin it comes from, and the ones that fail to load",
    "check-game": "run the games conformance kit on a game and print a pass/fail table",
    "show-game": "print a game's seats, roles and interaction graph, and draw it as a PNG",
    "plot": "write PNG curves (reward, win rate, invalid rate, role metrics, exploitability, "
    "KL, entropy) of a run directory",
    "tournament": "play participants against each other (round robin or gauntlet) and rate them",
    "ratings": "Bradley-Terry ratings with confidence intervals from a matches.jsonl log",
    "eval": "evaluate one checkpoint, model or bot against reference opponents",
    "play": "play a game in the terminal against a checkpoint, a model or a bot",
    "keys": "generate CURVE keypairs for a secure bus (arena keys generate DIR)",
    "status": "list every actor registered with a broker: kind, host, services, load, heartbeat",
    "deploy": "write a Slurm sbatch script or Kubernetes manifests that start a run's processes",
    "preload": "import torch and transformers once, then fork learners, inference and rollout "
    "actors (a run's own, or with --listen every run's on this host)",
}.items():
    commands.register(_name, f"arena.commands.{_name.replace('-', '_')}", help=_help)


class CommandError(RegistryError):
    """A command that cannot run: its module fails to import or lacks ``add_arguments``/``run``.
    ``reason`` is that alone; the message also names the command, its module and its plugin."""

    def __init__(self, name: str, module: str, plugin: str | None, reason: str) -> None:
        self.reason = reason
        origin = f"{module}, plugin {plugin}" if plugin else module
        super().__init__(f"command {name!r} ({origin}): {reason}")


def load(name: str) -> ModuleType:
    """The module of command ``name``, imported, with its ``add_arguments`` and ``run``.

    An unknown name raises :class:`RegistryError` (did you mean); a plugin's module that fails
    to import or lacks a function raises :class:`CommandError`. Arena's own modules import as
    they are: an error there is a bug and keeps its traceback.
    """
    entry = commands.entry(name)
    module_name = str(entry.factory)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # whatever a plugin's module raises on import
        if entry.plugin is None:
            raise
        reason = f"cannot import it: {type(err).__name__}: {err}"
        raise CommandError(name, module_name, entry.plugin, reason) from err
    lacking = [f for f in ("add_arguments", "run") if not callable(getattr(module, f, None))]
    if lacking:
        reason = f"module {module_name} has no {' and no '.join(lacking)}"
        raise CommandError(name, module_name, entry.plugin, reason)
    return module


def summary(name: str) -> str:
    """The one line ``arena --help`` shows for ``name``: its registered ``help``, else the first
    line of its module's docstring (a plugin's), else why it cannot run."""
    entry = commands.entry(name)
    if entry.metadata.get("help"):
        return str(entry.metadata["help"])
    try:
        doc = load(name).__doc__ or ""
    except CommandError as err:
        return f"(cannot run: {err.reason})"
    lines = [line.strip() for line in doc.replace("``", "").splitlines() if line.strip()]
    return lines[0] if lines else ""
