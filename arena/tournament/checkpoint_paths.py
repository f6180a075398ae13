"""Checkpoint paths as a person types them.

A run saves its checkpoints as ``<run>/checkpoints/step-00000012`` (zero-padded, so that they
sort). The commands that take a checkpoint (``arena eval``, ``arena play --against``, a
tournament's ``model:`` and ``adapter:``) also take:

- ``step-12`` for ``step-00000012`` (:func:`on_disk`), anywhere in the path
  (``RUN/checkpoints/step-8/adapters/solver``, ``RUN/checkpoints/policies/judge/step-8``);
- the run directory itself, for its newest checkpoint (:func:`newest_checkpoint`; ``arena eval``
  and ``arena play`` print which one they took);
- ``RUN:POLICY`` for the newest checkpoint of a named policy with a model of its own (a run of
  several models keeps it under ``checkpoints/policies/POLICY/``); ``RUN:main`` is the run's
  shared policy, as ``RUN`` alone. A policy that is a LoRA adapter on the run's base has no
  model of its own: it is refused naming its adapter (:func:`adapter_command`).

A LoRA run's checkpoint holds the frozen base in ``model/`` and each policy in
``adapters/<policy>/``: ``arena eval``, ``arena play`` and a tournament refuse such a checkpoint
without an adapter (:func:`refuse_frozen_base`), which would otherwise play the untrained base.

Nothing is loaded here, only looked up (no torch: a config error or a refusal costs none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from arena.core.errors import ConfigError
from arena.models.adapter_shape import SHARED_ADAPTER

STEP_DIR = re.compile(r"^step-(\d+)$")
"""A checkpoint directory's name (``step-00000012``, or ``step-12`` as typed)."""


def on_disk(spec: str) -> str:
    """``spec`` with each ``checkpoints/step-N`` that does not exist as typed replaced by the
    zero-padded directory that does (``step-12`` -> ``step-00000012``); anything else as is."""
    path = Path(spec).expanduser()
    if path.exists() or not any(STEP_DIR.match(p) for p in path.parts):
        return spec
    found = Path(path.parts[0])
    for part in path.parts[1:]:
        match = STEP_DIR.match(part)
        if match and holds_checkpoints(found) and not (found / part).exists():
            padded = f"step-{int(match.group(1)):08d}"
            if (found / padded).exists():
                part = padded
        found = found / part
    return str(found) if found.exists() else spec


def holds_checkpoints(folder: Path) -> bool:
    """Whether ``folder`` holds checkpoints: a run's ``checkpoints/``, or a named policy's
    ``checkpoints/policies/POLICY/``."""
    return folder.name == "checkpoints" or (
        folder.parent.name == POLICIES and folder.parent.parent.name == "checkpoints"
    )


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """The run's checkpoints that hold a model (``checkpoints/step-*/model/config.json``), as
    (step, path), oldest first."""
    return steps_in(run_dir / "checkpoints")


POLICIES = "policies"
"""Under a run's ``checkpoints/``: the checkpoints of each policy with a model of its own."""


def run_and_policy(spec: str) -> tuple[str, str | None]:
    """``RUN:POLICY`` split where ``RUN`` is a run directory; ``(spec, None)`` otherwise."""
    run, sep, policy = spec.rpartition(":")
    if sep and policy.isidentifier() and (Path(run).expanduser() / "checkpoints").is_dir():
        return run, policy
    return spec, None


def newest_checkpoint(spec: str) -> Path | None:
    """The newest checkpoint of the run directory ``spec`` (one with a ``checkpoints/``
    folder, that is not itself a model), or of one of its policies (``RUN:POLICY``); None for
    anything else. A run directory without a checkpoint yet, or without that policy, is a
    :class:`ConfigError`."""
    run, policy = run_and_policy(spec)
    path = Path(run).expanduser()
    if not (path / "checkpoints").is_dir() or (path / "config.json").is_file():
        return None
    folder = path
    if policy is not None and policy != "main":
        folder = path / "checkpoints" / POLICIES / policy
        if not folder.is_dir():
            known = sorted(p.name for p in (path / "checkpoints" / POLICIES).glob("*"))
            shared = checkpoints(path)
            adapters = policy_adapters(shared[-1][1]) if shared else []
            if policy in adapters:
                raise ConfigError(
                    f"{spec}: policy {policy!r} of run {run} is a LoRA adapter on the run's "
                    f"base, not a model of its own: {adapter_command(shared[-1][1], policy)}"
                )
            known = sorted({*known, *adapters})
            frozen = frozen_model(path, policy)
            if frozen is not None:
                raise ConfigError(
                    f"{spec}: policy {policy!r} of run {run} is frozen (train: false), so it "
                    f"has no checkpoints: it plays its model {frozen!r} as it is (evaluate that: "
                    f"--model {frozen}; a participant's model: {frozen})"
                )
            raise ConfigError(
                f"{spec}: run {run} has no policy {policy!r} with checkpoints of its own "
                f"(its policies: {', '.join(['main', *known])})"
            )
    found = checkpoints(path) if folder is path else steps_in(folder)
    if not found:
        raise ConfigError(
            f"run directory {spec} has no checkpoint with a model yet (checkpoints/step-*/model)"
        )
    return found[-1][1]


def frozen_model(run_dir: Path, policy: str) -> str | None:
    """The model of ``policy`` where the run's ``config.yaml`` declares it frozen (``train:
    false``: never trained, never checkpointed); None otherwise, or where the config cannot be
    read (the caller's own message stands then)."""
    from arena.run.config import load_run_config

    try:
        spec = load_run_config(str(run_dir / "config.yaml"), []).policies.get(policy)
    except Exception:  # an old or foreign run config: say what is on disk only
        return None
    return str(spec.model) if spec is not None and not spec.train and spec.model else None


def steps_in(folder: Path) -> list[tuple[int, Path]]:
    """The checkpoints in ``folder`` that hold a model (``step-*/model/config.json``), as
    (step, path), oldest first."""
    found = []
    for path in folder.glob("step-*"):
        match = STEP_DIR.match(path.name)
        if match and (path / "model" / "config.json").is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def checkpoint_of(spec: str) -> tuple[str, str | None]:
    """The checkpoint path that ``spec`` stands for (:func:`on_disk`, or a run directory's
    newest checkpoint), and a line that says which one was taken (None when ``spec`` names it
    itself)."""
    newest = newest_checkpoint(spec)
    if newest is not None:
        return str(newest), f"{spec}: its newest checkpoint, {newest.name} ({newest})"
    return on_disk(spec), None


def looks_like_path(spec: str) -> bool:
    """Whether ``spec`` was typed as a path (a separator, or ``.``/``~`` first) rather than a
    name such as ``tiny`` or ``smollm2-135m``."""
    return "/" in spec or spec.startswith((".", "~"))


def policy_adapters(checkpoint: Path) -> list[str]:
    """The named policies a LoRA run's checkpoint holds as adapters (``adapters/<policy>/``),
    sorted; none for any other directory. A shared policy's LoRA (:data:`SHARED_ADAPTER`) is
    not one: it is merged into the checkpoint's ``model/`` too, which plays it."""
    folder = Path(checkpoint).expanduser() / "adapters"
    if not (Path(checkpoint).expanduser() / "model").is_dir():
        return []
    return sorted(
        p.name
        for p in folder.glob("*")
        if p.name != SHARED_ADAPTER and (p / "adapter_config.json").is_file()
    )


def adapter_command(checkpoint: Path, policy: str, tournament: bool = False) -> str:
    """How to play ``policy``'s adapter in ``checkpoint``: ``--model BASE --adapter PATH``
    (``tournament``: a participant's ``model: BASE`` and ``adapter: PATH``), the base as the
    adapter names it."""
    adapter = Path(checkpoint) / "adapters" / policy
    try:
        base = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    except (OSError, ValueError, KeyError, TypeError):
        base = "BASE"
    if tournament:
        return f"a participant with model: {base} and adapter: {adapter} plays it"
    return f"--model {base} --adapter {adapter} plays it"


def refuse_frozen_base(spec: str, model_flag: str = "--model") -> None:
    """A :class:`ConfigError` where ``spec`` is a LoRA run's checkpoint played without an
    adapter: its ``model/`` is the frozen base, not what the run trained. ``model_flag`` is
    how the command names a model (``arena play``: ``--against``, which takes no adapter; a
    tournament participant: ``model:``)."""
    names = policy_adapters(Path(spec))
    if names:
        how = adapter_command(Path(spec), names[0], tournament=model_flag == "model:")
        if model_flag == "--against":  # arena play plays no adapter
            how = f"arena play plays no adapter (arena eval {how})"
        raise ConfigError(
            f"{spec} is a checkpoint of a run whose policies are LoRA adapters: its model/ is "
            f"the untrained base, and its policies are the adapters {', '.join(names)}; "
            f"{how} (the base alone: {model_flag} {spec}/model)"
        )
