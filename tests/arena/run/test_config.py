"""Run configs: merging, overrides, and errors that name the key and its nearest valid name.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_config.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.run.config import ConfigError, load_run_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


RUN_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.yaml") if not p.name.startswith("tournament"))
"""Run configs (tournament configs are checked in tests/arena/tournament/test_config.py)."""


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_every_shipped_config_resolves(name: str) -> None:
    config = load_run_config(CONFIGS / name)
    assert config.games and config.steps > 0
    assert config.learner.model == config.model  # the learner follows the run's model


def test_extends_and_overrides_merge_in_order() -> None:
    config = load_run_config(CONFIGS / "mars-gpu.yaml", ["steps=7", "games.0.weight=2.5"])
    assert config.name == "mars-gpu" and config.steps == 7
    assert [g.id for g in config.games] == ["tictactoe-v0", "kuhn-poker-v0", "mini-hanabi-v0"]
    assert config.games[0].weight == 2.5
    assert config.inference.backend == "vllm" and config.learner.advantage.mode == "batch"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("stepz=3", "did you mean 'steps'"),
        ("learner.optim.lrr=1e-5", "did you mean 'learner.optim.lr'"),
        ("games.0.idd=x", "did you mean 'games[0].id'"),
        ("steps=many", "steps"),
        ("mode=asynch", "did you mean 'async'"),
        ("inference.backend=vlm", "did you mean 'vllm'"),
        ("steps", "key=value"),
    ],
)
def test_bad_overrides_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_run_config(CONFIGS / "smoke.yaml", [override])


def test_unknown_key_in_a_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: " + str(CONFIGS / "smoke.yaml") + "\nrollout:\n  concurency: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'rollout.concurrency'"):
        load_run_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_run_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sampling.temperature=0"], "greedy sampling has no policy gradient"),
        (["rollout.group_size=0"], "rollout.group_size must be >= 1"),
        (["rollout.group_size=3"], r"episodes_per_step \(8\) must be a positive multiple"),
        (["learner.advantage.mode=group"], "set rollout.group_size >= 2"),
        (["learner.advantage.mode=broadcast"], "set rollout.group_size >= 2"),
    ],
)
def test_training_that_cannot_learn_is_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_run_config(CONFIGS / "smoke.yaml", overrides)


def test_the_evaluation_before_training_may_play_fewer_opponents() -> None:
    config = load_run_config(CONFIGS / "selfplay.yaml")
    assert config.eval.opponents_at("before") == ["random-v0"]
    assert config.eval.opponents_at("after") == ["random-v0", "strongest"]
    assert config.eval.opponents_at("step 4") == ["random-v0", "strongest"]
    plain = load_run_config(CONFIGS / "smoke.yaml")
    assert plain.eval.opponents_before is None
    assert plain.eval.opponents_at("before") == plain.eval.opponents
    with pytest.raises(ConfigError, match="eval.opponents_before is empty"):
        load_run_config(CONFIGS / "smoke.yaml", ["eval.opponents_before=[]"])


def test_groups_and_greedy_evaluation_are_accepted() -> None:
    config = load_run_config(
        CONFIGS / "smoke.yaml",
        ["rollout.group_size=4", "learner.advantage.mode=group", "eval.temperature=0"],
    )
    assert config.rollout.group_size == 4 and config.rollout.episodes_per_step == 8
    assert config.eval.temperature == 0.0  # greedy evaluation stays allowed
    assert load_run_config(CONFIGS / "smoke.yaml").rollout.group_size == 1  # the default


@pytest.mark.parametrize("override", ["sampling.top_p=0.9", "sampling.top_k=20"])
def test_truncated_sampling_is_refused_for_training(override: str) -> None:
    with pytest.raises(ConfigError, match="whole tempered distribution"):
        load_run_config(CONFIGS / "smoke.yaml", [override])


def test_the_learning_rate_decays_over_the_run_unless_told_otherwise() -> None:
    config = load_run_config(CONFIGS / "smoke.yaml", ["steps=12", "learner.optim.schedule=cosine"])
    assert config.learner.optim.total_steps == 12
    told = load_run_config(CONFIGS / "smoke.yaml", ["learner.optim.total_steps=40"])
    assert told.learner.optim.total_steps == 40
