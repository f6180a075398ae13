"""``arena train CONFIG resume=RUN [key=value ...]``: the config a resumed run continues with.

A resume starts from the run's saved ``config.yaml`` (what it ran with, every value resolved),
not from CONFIG: a run continues as it was. The command line's overrides go on top, and each
one that changes a value is printed (``steps: 4 -> 8``), so ``resume=RUN steps=8`` extends a
run by four steps. An override of what cannot change mid-run (:data:`FIXED`: the model, the
games, the named policies and their adapters' shape, the seed) is refused in one line naming
the key. ``learner.optim.total_steps`` follows ``steps`` when it did in the saved config.

A run that already finished (its final checkpoint at ``steps`` and its evaluation summary
written) is not started again: :func:`resume_run` says ``already complete at step N`` and the
command exits 0, unless ``steps`` was raised past N, which continues it to the new count.

A resumed run compares its final evaluation with the one taken before its first step
(``eval_before.json``); where the run took none then (evaluation was off, and turned on by the
resume), :func:`before_training` says so rather than reading the resumed, trained policy as
"before".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from arena.core.errors import ConfigError
from arena.core.overrides import parse_overrides
from arena.run.config import RunConfig, load_run_config

FIXED = {
    "model": "every checkpoint holds this model's weights",
    "inference.model": "every checkpoint holds the run's model's weights",
    "learner.model": "every checkpoint holds the run's model's weights",
    "games": "the run's metrics, evaluations and transcripts are of these games",
    "policies": "every checkpoint holds these policies' adapters",
    "seat_policies": "the adapters were trained on these seats",
    "learner.lora": "the checkpoints hold adapters of this shape",
    "learner.name": "the inference actors serve the trained policy under this name",
    "seed": "episodes are seeded by the seed and the step, so a resumed run plays the very "
    "episodes its checkpoint lacks",
    "run_dir": "resume continues the run in its own directory",
}
"""Keys (and everything under them) that cannot change mid-run -> why not."""

IGNORED = ("resume",)
"""Keys left out of the comparison: ``resume`` itself is the resumed run's own directory."""


@dataclasses.dataclass
class Resumed:
    """What a resume continues with."""

    config: RunConfig
    """The saved config, the command line's overrides on top, ``resume`` set."""
    changes: list[tuple[str, Any, Any]]
    """(key, saved value, new value) of each value the overrides changed."""
    complete_at: int | None
    """The step at which the run already finished, when nothing is left to train."""
    defaulted: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    """(key, value) of each setting the saved config.yaml lacks (written before the key
    existed), which the run now takes at its default."""


def resume_run(run_dir: str, overrides: Sequence[str]) -> RunConfig | None:
    """The config to continue the run in ``run_dir`` with, after printing what the command
    line changed; None (after saying so) when the run is already complete."""
    resumed = resumed_config(run_dir, overrides)
    print(
        f"arena train: resume={run_dir} continues the run's saved config.yaml (the CONFIG "
        "argument is not used)",
        flush=True,
    )
    for key, old, new in resumed.changes:
        print(f"  {key}: {_show(old)} -> {_show(new)}", flush=True)
    for key, value in resumed.defaulted:
        print(
            f"  {key}: not in the saved config.yaml, now {_show(value)} (the default)", flush=True
        )
    if resumed.complete_at is not None:
        print(
            f"arena train: {run_dir} is already complete at step {resumed.complete_at}; "
            f"raise steps to train on (resume={run_dir} steps=N)",
            flush=True,
        )
        return None
    return resumed.config


def resumed_config(run_dir: str, overrides: Sequence[str]) -> Resumed:
    """The saved config of ``run_dir`` with ``overrides`` on top; a :class:`ConfigError` for
    an override of a :data:`FIXED` key or a ``steps`` below the run's last checkpoint."""
    saved_path = Path(run_dir) / "config.yaml"
    if not saved_path.is_file():
        raise ConfigError(f"resume={run_dir}: {_not_a_run(Path(run_dir))}")
    own = [
        o for o, p in zip(overrides, parse_overrides(overrides), strict=True) if not _ignored(p.key)
    ]
    saved = load_run_config(saved_path)
    config = load_run_config(saved_path, own)
    keys = {p.key for p in parse_overrides(own)}
    optim = saved.learner.optim
    if optim.total_steps == saved.steps and "learner.optim.total_steps" not in keys:
        config.learner.optim.total_steps = config.steps  # the schedule spans the whole run
    changes = config_changes(saved, config)
    for key, old, new in changes:
        fixed = fixed_key(key)
        if fixed is not None:
            raise ConfigError(
                f"resume={run_dir}: {key} cannot change mid-run ({_show(old)} -> {_show(new)}): "
                f"{FIXED[fixed]}; start a new run to change it"
            )
    config = dataclasses.replace(config, resume=run_dir)
    complete_at = _complete_at(Path(run_dir), config.steps)
    return Resumed(config, changes, complete_at, _defaulted(saved_path, config, keys))


def before_training(
    saved: list[dict[str, Any]] | None, wanted: bool, step: int
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The evaluation before training that a run at ``step`` compares its last one with, and
    what to say about it: the one saved at the start (``saved``); None (evaluate now) at step 0
    with ``eval.before``; otherwise none ([]) and why, since past step 0 the policy is a
    trained one and would be misread as the one before training."""
    if saved is not None:
        return saved, None
    if not wanted:
        return [], "no evaluation before training (eval.before: false)"
    if step > 0:
        return [], (
            f"no evaluation before training: the run took none at its start (eval.games or "
            f"eval.before was off) and at step {step} its policy is a trained one; the summary "
            "has no before column"
        )
    return None, None


def config_changes(old: RunConfig, new: RunConfig) -> list[tuple[str, Any, Any]]:
    """(dotted key, old value, new value) of every leaf that differs, in the schema's order."""
    before, after = _leaves(old), _leaves(new)
    keys = [*before, *(k for k in after if k not in before)]
    return [
        (key, before.get(key), after.get(key))
        for key in keys
        if before.get(key) != after.get(key)
        and not _ignored(key)
        # an empty mapping that got entries: the entries tell the change
        and not _nested(key, before if key not in before else after)
    ]


def _nested(key: str, leaves: dict[str, Any]) -> bool:
    """Whether ``leaves`` holds keys under ``key`` (it was a mapping or list there)."""
    return any(k.startswith(f"{key}.") for k in leaves)


def fixed_key(key: str) -> str | None:
    """The :data:`FIXED` key that ``key`` is or lies under, or None."""
    for fixed in FIXED:
        if key == fixed or key.startswith(f"{fixed}."):
            return fixed
    return None


def _defaulted(saved_path: Path, config: RunConfig, given: set[str]) -> list[tuple[str, Any]]:
    """The settings of ``config`` that the saved file lacks and the command line did not give:
    a run written by an older Arena, which would otherwise change silently with the default."""
    written = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=False)
    present = set(_walk(written if isinstance(written, dict) else {}))
    return [
        (key, value)
        for key, value in _leaves(config).items()
        if key not in present
        and not _ignored(key)
        and not any(key == g or key.startswith(f"{g}.") for g in given)
        # under a leaf the file holds (an empty mapping there): the file's value, not a default
        and not any(key.startswith(f"{p}.") for p in present)
    ]


def _not_a_run(path: Path) -> str:
    """Why ``path`` (without a config.yaml) is no run to resume, and what to give instead: a
    checkpoint or a folder inside a run names the run."""
    if not path.exists():
        return "no such directory"
    run = next((p for p in path.resolve().parents if (p / "config.yaml").is_file()), None)
    if run is None:
        return "no config.yaml there; is it a run directory?"
    return (
        f"no config.yaml there: it lies inside the run {run}; resume={run} continues that run "
        "from its newest checkpoint (to continue from an older one, move the newer ones out "
        "of its checkpoints/)"
    )


def _complete_at(run_dir: Path, steps: int) -> int | None:
    """The last checkpoint's step when the run finished there (its summary written) and
    ``steps`` asks no more; a ``steps`` below a checkpoint the run holds is refused."""
    from trainers.checkpoint_dirs import list_checkpoints

    found = list_checkpoints(run_dir / "checkpoints")
    last = found[-1][0] if found else 0
    if last >= steps and (run_dir / "eval_summary.json").is_file():
        return last
    if last > steps:
        raise ConfigError(
            f"resume={run_dir}: steps={steps} is below the run's last checkpoint (step {last}); "
            f"steps can only grow"
        )
    return None


def _leaves(config: RunConfig) -> dict[str, Any]:
    """Every leaf of the config by dotted key (list items by index: ``games.0.id``); an empty
    mapping or list is a leaf of its own."""
    return _walk(OmegaConf.to_container(OmegaConf.structured(config), resolve=True))


def _walk(tree: Any) -> dict[str, Any]:
    """The leaves of a nested dict/list by dotted key."""
    leaves: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            dotted = f"{prefix}{key}"
            if isinstance(value, dict | list) and value:
                walk(f"{dotted}.", value)
            else:
                leaves[dotted] = value

    walk("", tree)
    return leaves


def _ignored(key: str) -> bool:
    return any(key == k or key.startswith(f"{k}.") for k in IGNORED)


def _show(value: Any) -> str:
    return "unset" if value is None else str(value)
