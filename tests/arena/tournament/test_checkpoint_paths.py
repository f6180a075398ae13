"""Checkpoint paths as a person types them (:mod:`arena.tournament.checkpoint_paths`):
``step-12`` for ``step-00000012``, a run directory for its newest checkpoint, and a path that
does not exist named as such.

Run with `.venv/bin/python -m pytest -q tests/arena/tournament/test_checkpoint_paths.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.tournament.checkpoint_paths import (
    checkpoint_of,
    newest_checkpoint,
    on_disk,
    policy_adapters,
    refuse_frozen_base,
)
from arena.tournament.participants import parse_participant, resolve_participants


def make_run(root: Path, *steps: int) -> Path:
    """A run directory whose checkpoints hold a (fake) model each."""
    for step in steps:
        model = root / "checkpoints" / f"step-{step:08d}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    return root


def test_step_n_stands_for_the_zero_padded_directory(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", 4, 12)
    (run / "checkpoints" / "step-00000012" / "adapters" / "solver").mkdir(parents=True)
    padded = run / "checkpoints" / "step-00000012"
    assert on_disk(str(run / "checkpoints" / "step-12")) == str(padded)
    assert on_disk(str(run / "checkpoints" / "step-12" / "adapters" / "solver")) == str(
        padded / "adapters" / "solver"
    )
    assert on_disk(str(padded)) == str(padded)  # as on disk already
    for missing in ("step-5", "step-12/adapters/judge"):  # no such checkpoint: left as typed
        assert on_disk(str(run / "checkpoints" / missing)) == str(run / "checkpoints" / missing)
    assert on_disk("tiny") == "tiny"
    (participant,) = resolve_participants(
        [parse_participant(str(run / "checkpoints" / "step-12"))], minimum=1
    )
    assert participant.model == str(padded / "model")


def test_a_run_directory_stands_for_its_newest_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", 4, 12, 8)
    (run / "checkpoints" / "step-00000016").mkdir()  # being written: no model yet
    newest = run / "checkpoints" / "step-00000012"
    assert newest_checkpoint(str(run)) == newest
    assert checkpoint_of(str(run)) == (
        str(newest),
        f"{run}: its newest checkpoint, step-00000012 ({newest})",
    )
    assert checkpoint_of(str(newest)) == (str(newest), None)
    assert checkpoint_of("random-v0") == ("random-v0", None)
    assert newest_checkpoint(str(tmp_path)) is None  # not a run directory
    empty = tmp_path / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="has no checkpoint with a model yet"):
        checkpoint_of(str(empty))


def test_a_path_that_does_not_exist_is_named_as_such(tmp_path: Path) -> None:
    missing = tmp_path / "runs" / "x" / "checkpoints" / "step-12"
    with pytest.raises(ConfigError, match=f"no such file or directory: {missing}$"):
        resolve_participants([parse_participant(str(missing))], minimum=1)
    with pytest.raises(ConfigError, match="no model 'smollm2-13': expected 'tiny'"):
        resolve_participants([parse_participant("smollm2-13")], minimum=1)


def test_run_colon_policy_stands_for_that_policys_newest_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", 2)
    for step in (1, 3):
        model = run / "checkpoints" / "policies" / "responder" / f"step-{step:08d}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    own = run / "checkpoints" / "policies" / "responder" / "step-00000003"
    assert newest_checkpoint(f"{run}:responder") == own
    # step-3 in a policy's own checkpoints, as in the run's (it was left as typed: no such file)
    assert on_disk(str(run / "checkpoints" / "policies" / "responder" / "step-3")) == str(own)
    assert newest_checkpoint(f"{run}:main") == run / "checkpoints" / "step-00000002"
    with pytest.raises(ConfigError, match=r"no policy 'judge'.*its policies: main, responder"):
        newest_checkpoint(f"{run}:judge")
    (participant,) = resolve_participants([parse_participant(f"{run}:responder")], minimum=1)
    assert participant.model == str(own / "model")
    assert participant.name == "responder@step-3"
    # a frozen policy never trains, so it has no checkpoints: say so, and what it plays
    (run / "config.yaml").write_text(
        "model: tiny\npolicies:\n  responder: {model: tiny}\n"
        "  judge: {model: tiny, train: false}\n"
        "seat_policies: {player_1: responder, judge: judge}\n"
    )
    with pytest.raises(ConfigError) as caught:
        newest_checkpoint(f"{run}:judge")
    assert str(caught.value) == (
        f"{run}:judge: policy 'judge' of run {run} is frozen (train: false), so it has no "
        "checkpoints: it plays its model 'tiny' as it is (evaluate that: --model tiny; a "
        "participant's model: tiny)"
    )


def test_a_lora_runs_checkpoint_is_refused_without_its_adapter(tmp_path: Path) -> None:
    """A run whose policies are LoRA adapters keeps the frozen base in a checkpoint's model/:
    `arena eval RUN` played that untrained base as if it were the run, and `RUN:poker` was
    refused as a policy the run does not have (`its policies: main`)."""
    run = make_run(tmp_path / "run", 2)
    ckpt = run / "checkpoints" / "step-00000002"
    for name in ("poker", "responder", "shared-lora"):
        (ckpt / "adapters" / name).mkdir(parents=True)
        (ckpt / "adapters" / name / "adapter_config.json").write_text(
            '{"base_model_name_or_path": "tiny"}'
        )
    assert policy_adapters(ckpt) == ["poker", "responder"]  # shared-lora is merged in model/
    adapter = ckpt / "adapters" / "poker"
    with pytest.raises(ConfigError) as err:
        refuse_frozen_base(checkpoint_of(str(run))[0])
    assert str(err.value) == (
        f"{ckpt} is a checkpoint of a run whose policies are LoRA adapters: its model/ is the "
        "untrained base, and its policies are the adapters poker, responder; "
        f"--model tiny --adapter {adapter} plays it (the base alone: --model {ckpt}/model)"
    )
    refuse_frozen_base(str(ckpt / "model"))  # the base, asked for by name
    refuse_frozen_base("tiny")
    with pytest.raises(ConfigError) as err:
        newest_checkpoint(f"{run}:poker")
    assert str(err.value) == (
        f"{run}:poker: policy 'poker' of run {run} is a LoRA adapter on the run's base, not a "
        f"model of its own: --model tiny --adapter {adapter} plays it"
    )
    with pytest.raises(ConfigError, match=r"its policies: main, poker, responder\)"):
        newest_checkpoint(f"{run}:judge")
    # only a shared policy's LoRA: model/ holds it merged, and plays
    (ckpt / "adapters" / "poker").rename(tmp_path / "poker")
    (ckpt / "adapters" / "responder").rename(tmp_path / "responder")
    refuse_frozen_base(str(ckpt))
    (tmp_path / "poker").rename(ckpt / "adapters" / "poker")
    with pytest.raises(ConfigError) as err:  # arena play's --against takes no adapter
        refuse_frozen_base(str(ckpt), "--against")
    assert str(err.value).endswith(
        f"the adapters poker; arena play plays no adapter (arena eval --model tiny --adapter "
        f"{adapter} plays it) (the base alone: --against {ckpt}/model)"
    )
    # a tournament's participant, by path or among a glob's matches, likewise
    from arena.tournament.config import ParticipantConfig
    from arena.tournament.participants import resolve_participants

    for model in (str(ckpt), str(run / "checkpoints" / "step-*")):
        with pytest.raises(ConfigError) as err:
            resolve_participants([ParticipantConfig(name="run", model=model)], minimum=1)
        assert str(err.value).endswith(
            f"the adapters poker; a participant with model: tiny and adapter: {adapter} plays it "
            f"(the base alone: model: {ckpt}/model)"
        ), str(err.value)
