"""``arena train CONFIG resume=RUN [key=value ...]``: the config a resumed run continues with.

A resume starts from the run's saved ``config.yaml`` (what it ran with, every value resolved),
not from CONFIG: a run continues as it was. The command line's overrides go on top, and each
one that changes a value is printed (``steps: 4 -> 8``), so ``resume=RUN steps=8`` extends a
run by four steps. An override of what cannot change mid-run (:data:`FIXED`: the model, the
games, the named policies and their adapters' shape, the seed) is refused in one line naming
the key. ``learner.optim.total_steps`` follows ``steps`` when it did in the saved config.

A run that already finished (its final checkpoint at ``steps`` and its evaluation summary
written) is not started again: :func:`resume_run` says ``already complete at step N`` and the
command exits 0, unless ``steps`` was raised past N, which continues it to the new count. Any
other change on the command line is then said to be not applied (nothing ran), and a ``steps``
below N that the run already did (``steps: 2 -> 1``) is said to change nothing.

A resumed run compares its final evaluation with the one taken before its first step
(``eval_before.json``); where the run took none then (evaluation was off, and turned on by the
resume), :func:`before_training` says so rather than reading the resumed, trained policy as
"before". Each saved row holds the settings it was measured under
(:func:`~arena.run.run_log.reading_settings`); a resume that changed them (``eval.games``,
``eval.temperature``, ``eval.opponents``) compares no reading with one taken otherwise: at step
0 the policy is still the initial one and is evaluated again; past it, the rows measured
otherwise (under another games count or temperature, or against an opponent no longer played)
are left out of the before column, and ``events.log`` says which and why. The random mover's
(``eval_baseline.json``), which needs no model, is measured again (:func:`saved_baseline`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from arena.core.errors import ConfigError
from arena.core.overrides import parse_overrides
from arena.play.seating import resolve_opponent
from arena.run.config import EvalConfig, RunConfig, load_run_config
from arena.run.run_log import SETTINGS, reading_settings

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

_FOLLOW_STEPS = ("steps", "learner.optim.total_steps")
"""Changes that only ``steps`` makes: on a finished run, said by what is said of ``steps``."""

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
        print(f"arena train: {_complete(run_dir, resumed)}", flush=True)
        return None
    return resumed.config


def _complete(run_dir: str, resumed: Resumed) -> str:
    """What a resume of a finished run says: it is complete, nothing ran, and so any change
    printed above was not applied; a ``steps`` at or below the steps done changes nothing."""
    done = resumed.complete_at
    steps = resumed.config.steps
    others = [key for key, _, _ in resumed.changes if key not in _FOLLOW_STEPS]
    said = f"{run_dir} is already complete at step {done}"
    if steps < done:
        said = (
            f"{run_dir} already did {done} steps and is complete: steps={steps} changes "
            f"nothing (steps can only grow)"
        )
    if others:
        said += "; the changes above were not applied (nothing ran)"
    return f"{said}; raise steps past {done} to train on (resume={run_dir} steps=N)"


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
    saved: list[dict[str, Any]] | None, settings: EvalConfig, step: int
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The evaluation before training that a run at ``step`` compares its last one with, and
    what to say about it: the one saved at the start (``saved``), less the rows measured under
    other ``settings`` than the run's now (:func:`comparable`); None (evaluate now) at step 0
    with ``eval.before``, or at step 0 when the settings changed; otherwise none ([]) and why,
    since past step 0 the policy is a trained one and would be misread as the one before
    training."""
    if saved is not None:
        kept, changed = comparable(saved, settings, "before")
        if not changed or not settings.games:  # nothing evaluated after: nothing to compare
            return saved, None
        taken = f"the evaluation before training (eval_before.json) was taken with {changed}"
        if step == 0 and settings.before:  # the policy served is still the initial one
            return None, f"{taken}: evaluating the initial policy again"
        why = (
            f"at step {step} the policy is a trained one, so it cannot be taken again"
            if step > 0
            else "eval.before is off"
        )
        left_out = _rows(r for r in saved if r not in kept)
        return kept, f"{taken}; {why}: the summary has no before column for {left_out}"
    if not settings.before:
        return [], "no evaluation before training (eval.before: false)"
    if step > 0:
        return [], (
            "no evaluation before training: the run saved none at its start (eval.games or "
            "eval.before was off, or eval_before.json could not be read) and at step "
            f"{step} its policy is a trained one; the summary has no before column"
        )
    return None, None


def saved_baseline(
    saved: list[dict[str, Any]] | None, settings: EvalConfig
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The random mover's evaluation to reuse (``eval_baseline.json``) and what to say: None
    (measure it again: it plays no model, so any step can) when it was taken under other
    ``settings`` than the run's now."""
    if saved is None:
        return None, None
    now = reading_settings(settings, "baseline")
    changed = _said({k: v for row in saved for k, v in _differs(row, now).items()})
    if not changed:  # an opponent added counts too: it needs a row of its own
        return saved, None
    taken = f"the random mover's evaluation (eval_baseline.json) was taken with {changed}"
    return None, f"{taken}: measuring it again"


def comparable(
    saved: list[dict[str, Any]], settings: EvalConfig, label: str
) -> tuple[list[dict[str, Any]], str]:
    """The rows of the saved ``label`` evaluation that compare with the run's evaluations under
    ``settings`` now, and the changes that left the others out (``""``: none left out). A row
    measured under another games count or temperature is left out, and after a change of
    ``eval.opponents``, a row against an opponent no longer played (its invalid rate would
    stand beside one read against another opponent); a row without settings (from an older
    run) is kept."""
    now = reading_settings(settings, label)
    kept: list[dict[str, Any]] = []
    changes: dict[str, tuple[Any, Any]] = {}
    for row in saved:
        differs = _differs(row, now)
        gone = (
            "opponents" in differs
            and "opponent" in row
            and row["opponent"]
            not in {resolve_opponent(o, row["game"]) for o in settings.opponents}
        )
        if gone or differs.keys() & {"games", "temperature"}:
            changes.update({k: v for k, v in differs.items() if k != "opponents" or gone})
        else:
            kept.append(row)
    return kept, _said(changes)


def _differs(row: dict[str, Any], now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Setting -> (then, now) of each setting the ``row`` was measured under that differs from
    ``now``; none for a row without settings (an older run's)."""
    then = row.get(SETTINGS)
    if not isinstance(then, dict):
        return {}
    return {k: (then[k], now[k]) for k in now if k in then and then[k] != now[k]}


def _said(changes: dict[str, tuple[Any, Any]]) -> str:
    return " and ".join(
        f"eval.{key}={_setting(old)} (now {_setting(new)})" for key, (old, new) in changes.items()
    )


def _setting(value: Any) -> str:
    """A setting as written in a config: ``[random-v0, strongest]``, ``0.7``."""
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _rows(rows: Any) -> str:
    """The games (and opponents, or roles) of evaluation rows, each once, for a message."""
    names: list[str] = []
    for row in rows:
        what = (
            f"{row['game']} vs {row['opponent']}" if "opponent" in row else f"{row['game']} roles"
        )
        if what not in names:
            names.append(what)
    return ", ".join(names)


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
