"""``resume=RUN`` (arena/run/resume.py): the saved config, the command line's overrides on top,
what cannot change mid-run refused, and a finished run not started again.

The unit tests build a run directory by hand (no processes); the ``e2e`` ones share one trained
run of the tiny model. Run with
``.venv/bin/python -m pytest -q -p no:cacheprovider tests/arena/run/test_resume.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.play.config import GameConfig
from arena.run.config import EvalConfig, RunConfig, load_run_config
from arena.run.evaluation import evaluate_baseline
from arena.run.processes import write_configs
from arena.run.resume import (
    before_training,
    config_changes,
    fixed_key,
    resume_run,
    resumed_config,
    saved_baseline,
)
from arena.run.run_dir import resolve_for_run
from arena.run.run_log import RunLog
from tests.cli import arena

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "configs" / "smoke.yaml"
QUICK = ("eval.games=0", "eval.exploitability=false", "rollout.actors=1")


def saved_run(run_dir: Path, *overrides: str, step: int | None = None) -> Path:
    """A run directory as ``arena train`` leaves it: its resolved config.yaml, and with
    ``step`` a checkpoint there and the evaluation summary of a finished run."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = load_run_config(SMOKE, [*QUICK, *overrides])
    write_configs(resolve_for_run(config, run_dir), run_dir)
    if step is not None:
        checkpoint = run_dir / "checkpoints" / f"step-{step:08d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "state.json").write_text("{}")
        (run_dir / "eval_summary.json").write_text("{}")
    return run_dir


def test_overrides_go_on_the_saved_config_and_each_change_is_listed(tmp_path: Path) -> None:
    run_dir = saved_run(tmp_path / "run", "steps=4")
    resumed = resumed_config(str(run_dir), [f"resume={run_dir}", "steps=8", "mode=async"])
    config = resumed.config
    assert (config.steps, config.mode, config.resume) == (8, "async", str(run_dir))
    assert config.eval.games == 0  # from the saved config, not from smoke.yaml
    assert resumed.changes == [
        ("mode", "sync", "async"),
        ("steps", 4, 8),
        ("learner.optim.total_steps", 4, 8),  # the schedule follows steps, as it did
    ]
    assert resumed.complete_at is None
    # an override that changes nothing lists nothing
    assert resumed_config(str(run_dir), ["steps=4"]).changes == []


def test_total_steps_set_on_its_own_stays_as_set(tmp_path: Path) -> None:
    run_dir = saved_run(tmp_path / "run", "learner.optim.total_steps=20")
    changes = resumed_config(str(run_dir), ["steps=3"]).changes
    assert changes == [("steps", 2, 3)]
    given = resumed_config(str(run_dir), ["steps=3", "learner.optim.total_steps=30"])
    assert given.config.learner.optim.total_steps == 30


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("model=smollm2-135m", "model"),
        ("games.0.id=connect-four-v0", "games.0.id"),
        ("games.1.kwargs.max_retries=3", "games.1.kwargs.max_retries"),
        ("seed=7", "seed"),
        ("learner.lora.r=4", "learner.lora.r"),
        ("learner.name=other", "learner.name"),
    ],
)
def test_what_cannot_change_mid_run_is_refused_naming_the_key(
    tmp_path: Path, override: str, key: str
) -> None:
    run_dir = saved_run(tmp_path / "run")
    with pytest.raises(ConfigError) as caught:
        resumed_config(str(run_dir), [override])
    message = str(caught.value)
    assert message.startswith(f"resume={run_dir}: {key} cannot change mid-run (")
    assert "start a new run" in message and "\n" not in message


def test_fixed_keys_cover_what_lies_under_them() -> None:
    assert fixed_key("games.0.simulators.user.id") == "games"
    assert fixed_key("model") == "model" and fixed_key("learner.lora.alpha") == "learner.lora"
    assert fixed_key("steps") is None and fixed_key("models") is None
    assert fixed_key("learner.optim.lr") is None


def test_changes_list_leaves_in_the_schemas_order() -> None:
    old = load_run_config(SMOKE)
    new = load_run_config(SMOKE, ["eval.opponents=[random-v0,strongest]", "steps=5"])
    assert config_changes(old, new) == [
        ("steps", 2, 5),
        ("learner.optim.total_steps", 2, 5),  # a fresh load follows steps
        ("eval.opponents.1", None, "strongest"),
    ]
    # entries of a mapping that was empty: each entry, not the empty mapping
    grown = load_run_config(SMOKE, ["games.0.simulators.player_1.id=scripted-user-v0"])
    changes = config_changes(old, grown)
    assert ("games.0.simulators.player_1.id", None, "scripted-user-v0") in changes
    assert all(key.startswith("games.0.simulators.player_1.") for key, _, _ in changes)


def test_a_finished_run_is_complete_unless_steps_grow(tmp_path: Path, capsys) -> None:
    run_dir = saved_run(tmp_path / "run", step=2)
    assert resumed_config(str(run_dir), []).complete_at == 2
    assert resume_run(str(run_dir), [f"resume={run_dir}"]) is None
    assert f"{run_dir} is already complete at step 2" in capsys.readouterr().out
    longer = resume_run(str(run_dir), ["steps=3"])
    assert longer is not None and longer.steps == 3
    assert "  steps: 2 -> 3" in capsys.readouterr().out.splitlines()
    # fewer steps than it has: still complete, never trained backwards
    assert resumed_config(str(run_dir), ["steps=1"]).complete_at == 2


def test_a_finished_run_says_what_its_overrides_did_not_do(tmp_path: Path, capsys) -> None:
    run_dir = saved_run(tmp_path / "run", step=2)
    assert resume_run(str(run_dir), ["eval.games=8"]) is None
    out = capsys.readouterr().out.splitlines()
    assert "  eval.games: 0 -> 8" in out
    assert out[-1] == (
        f"arena train: {run_dir} is already complete at step 2; the changes above were not "
        f"applied (nothing ran); raise steps past 2 to train on (resume={run_dir} steps=N)"
    )
    assert resume_run(str(run_dir), ["steps=1"]) is None
    out = capsys.readouterr().out.splitlines()
    assert "  steps: 2 -> 1" in out
    assert out[-1] == (
        f"arena train: {run_dir} already did 2 steps and is complete: steps=1 changes nothing "
        f"(steps can only grow); raise steps past 2 to train on (resume={run_dir} steps=N)"
    )


def test_an_unfinished_run_continues_and_cannot_shrink_below_its_checkpoint(
    tmp_path: Path,
) -> None:
    run_dir = saved_run(tmp_path / "run", "steps=4", step=3)
    (run_dir / "eval_summary.json").unlink()  # killed after step 3
    assert resumed_config(str(run_dir), []).complete_at is None
    with pytest.raises(ConfigError, match=r"steps=2 is below the run's last checkpoint \(step 3"):
        resumed_config(str(run_dir), ["steps=2"])
    # killed after its last step, before its evaluation: resumed to finish it
    assert resumed_config(str(run_dir), ["steps=3"]).complete_at is None


def test_a_directory_without_a_saved_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no config.yaml there; is it a run directory"):
        resumed_config(str(tmp_path), [])
    with pytest.raises(ConfigError, match=r"resume=\S+/gone: no such directory$"):
        resumed_config(str(tmp_path / "gone"), [])


def test_a_checkpoint_given_for_the_run_names_the_run(tmp_path: Path) -> None:
    run_dir = saved_run(tmp_path / "run", step=2)
    checkpoint = run_dir / "checkpoints" / "step-00000002"
    with pytest.raises(ConfigError) as caught:
        resumed_config(str(checkpoint), [])
    assert str(caught.value) == (
        f"resume={checkpoint}: no config.yaml there: it lies inside the run {run_dir.resolve()}; "
        f"resume={run_dir.resolve()} continues that run from its newest checkpoint (to continue "
        "from an older one, move the newer ones out of its checkpoints/)"
    )


def test_settings_an_older_saved_config_lacks_are_printed_with_their_default(
    tmp_path: Path, capsys
) -> None:
    run_dir = saved_run(tmp_path / "run", "rollout.transcripts_every=1")
    saved = run_dir / "config.yaml"
    # written before these keys existed: they now take their defaults, which is said
    lines = saved.read_text().splitlines(keepends=True)
    old = [
        ln for ln in lines if ln.strip().split(":")[0] not in ("transcripts_every", "warmup_steps")
    ]
    assert len(lines) - len(old) == 2
    saved.write_text("".join(old))
    assert resumed_config(str(run_dir), ["steps=3"]).defaulted == [
        ("rollout.transcripts_every", 1),
        ("learner.optim.warmup_steps", 0),
    ]
    # one given on the command line is the command line's, not a default
    given = resumed_config(str(run_dir), ["learner.optim.warmup_steps=1"])
    assert given.defaulted == [("rollout.transcripts_every", 1)]
    assert resume_run(str(run_dir), ["steps=3"]) is not None
    out = capsys.readouterr().out.splitlines()
    assert "  rollout.transcripts_every: not in the saved config.yaml, now 1 (the default)" in out


def test_a_resumed_run_without_an_evaluation_from_its_start_reads_no_before() -> None:
    saved = [{"game": "kuhn-poker-v0", "score": 0.5}]  # an older run's: no settings recorded
    on, off = EvalConfig(), EvalConfig(before=False)
    assert before_training(saved, on, 2) == (saved, None)  # the one from the start
    assert before_training(None, on, 0) == (None, None)  # step 0: evaluate now
    assert before_training(None, off, 0) == (
        [],
        "no evaluation before training (eval.before: false)",
    )
    # eval turned on by the resume at step 2: the policy now is trained, not "before"
    before, said = before_training(None, on, 2)
    assert before == [] and said is not None and "at step 2 its policy is a trained one" in said


def test_a_resume_with_other_evaluation_settings_compares_no_reading_taken_otherwise(
    tmp_path: Path,
) -> None:
    # Before, eval_before.json was reused whatever the resume changed: the table set a greedy
    # reading over 6 games beside one sampled at 0.7 over 2, or read the invalid rate against
    # another opponent after than before.
    nim = GameConfig(id="nim-v0", kwargs={"heaps": [1, 1]})
    settings = EvalConfig(games=2, opponents=["random-v0", "strongest"], concurrency=2)
    log = RunLog(tmp_path, RunConfig(games=[nim], eval=settings))
    results = asyncio.run(evaluate_baseline(log.config, log))  # any rows will do
    log.evaluation("before", 0, results)
    saved, baseline = log.load_eval("before"), log.load_eval("baseline")
    assert saved is not None and baseline is not None
    assert [(r["opponent"], r["eval_settings"]) for r in saved] == [
        ("random-v0", {"games": 2, "opponents": ["random-v0", "strongest"], "temperature": 0.0}),
        (
            "nim-optimal-v0",
            {"games": 2, "opponents": ["random-v0", "strongest"], "temperature": 0.0},
        ),
    ]
    assert baseline[0]["eval_settings"] == {"games": 2, "opponents": ["random-v0", "strongest"]}
    # the same settings: both reused as they are
    assert before_training(saved, settings, 3) == (saved, None)
    assert saved_baseline(baseline, settings) == (baseline, None)
    # another games count or temperature: past step 0 nothing compares, and the log says why
    fewer = replace(settings, games=6)
    assert before_training(saved, fewer, 3) == (
        [],
        "the evaluation before training (eval_before.json) was taken with eval.games=2 (now 6); "
        "at step 3 the policy is a trained one, so it cannot be taken again: the summary has no "
        "before column for nim-v0 vs random-v0, nim-v0 vs nim-optimal-v0",
    )
    warmer = replace(settings, temperature=0.7)
    kept, said = before_training(saved, warmer, 3)
    assert kept == [] and said is not None and "eval.temperature=0 (now 0.7)" in said
    # ... and at step 0 the policy is still the initial one: evaluated again
    assert before_training(saved, fewer, 0) == (
        None,
        "the evaluation before training (eval_before.json) was taken with eval.games=2 (now 6): "
        "evaluating the initial policy again",
    )
    # an opponent dropped: its rows go; the ones still played compare as they were
    fewer_bots = replace(settings, opponents=["strongest"])
    kept, said = before_training(saved, fewer_bots, 3)
    assert kept == saved[1:]
    assert said == (
        "the evaluation before training (eval_before.json) was taken with "
        "eval.opponents=[random-v0, strongest] (now [strongest]); at step 3 the policy is a "
        "trained one, so it cannot be taken again: the summary has no before column for nim-v0 "
        "vs random-v0"
    )
    # an opponent added leaves every saved row comparable
    more_bots = replace(settings, opponents=["random-v0", "strongest", "minimax-v0"])
    assert before_training(saved, more_bots, 3) == (saved, None)
    # the random mover plays no model: measured again under the new settings
    assert saved_baseline(baseline, fewer) == (
        None,
        "the random mover's evaluation (eval_baseline.json) was taken with eval.games=2 "
        "(now 6): measuring it again",
    )
    assert saved_baseline(baseline, warmer) == (baseline, None)  # it samples nothing
    # ... and an opponent added needs a row of its own
    assert saved_baseline(baseline, more_bots)[0] is None
    assert saved_baseline(None, settings) == (None, None)


# -- against a real run -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One smoke run of the tiny model, 2 steps, trained to completion."""
    run_dir = tmp_path_factory.mktemp("resume") / "run"
    done = arena("train", SMOKE, f"run_dir={run_dir}", "steps=2", *QUICK)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return run_dir


def steps_of(run_dir: Path) -> list[int]:
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(row)["step"] for row in rows]


@pytest.mark.e2e
def test_resume_extends_a_finished_run_then_says_it_is_complete(trained_run: Path) -> None:
    assert steps_of(trained_run) == [1, 2]
    longer = arena("train", SMOKE, f"resume={trained_run}", "steps=3")
    assert longer.returncode == 0, longer.stdout[-3000:] + longer.stderr[-3000:]
    assert "  steps: 2 -> 3" in longer.stdout.splitlines()
    assert steps_of(trained_run) == [1, 2, 3]
    assert (trained_run / "checkpoints" / "step-00000003").is_dir()
    started = time.monotonic()
    again = arena("train", SMOKE, f"resume={trained_run}")
    assert again.returncode == 0, again.stderr
    assert f"{trained_run} is already complete at step 3" in again.stdout
    assert time.monotonic() - started < 30  # nothing was started
    assert steps_of(trained_run) == [1, 2, 3]


@pytest.mark.e2e
def test_resume_refuses_a_new_model_in_one_line(trained_run: Path) -> None:
    refused = arena("train", SMOKE, f"resume={trained_run}", "model=smollm2-135m")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "model cannot change mid-run (tiny -> smollm2-135m)" in lines[0]
