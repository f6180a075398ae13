"""Several models in one run, through ``arena train``: Kuhn's second seat on a model of its own
with a learner of its own, mae-v0's judge on a frozen model of its own, the rest on the shared
policy; each learner trains only its own policy's turns, both checkpoint, and a resume continues
both.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_bases.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.cli import ROOT, arena

CONFIG = f"""
extends: {ROOT}/configs/two_models.yaml
model: tiny
rollout: {{actors: 1, episodes_per_step: 8}}
"""


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def weights(step_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(step_dir / "model" / "model.safetensors"))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("bases")
    config = tmp / "two.yaml"
    config.write_text(CONFIG)
    run_dir = tmp / "run"
    done = arena("train", str(config), f"run_dir={run_dir}", "steps=1")
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    (run_dir / "first.out").write_text(done.stdout)
    resumed = arena("train", str(config), f"resume={run_dir}", "steps=2")
    assert resumed.returncode == 0, resumed.stderr[-3000:] + resumed.stdout[-3000:]
    (run_dir / "resumed.out").write_text(resumed.stdout)
    return run_dir


@pytest.mark.e2e
def test_each_learner_trains_only_its_own_policys_turns(run: Path) -> None:
    out = (run / "first.out").read_text()
    assert "player_0=player-v0@main player_1=player-v0@responder" in out
    assert "judge=judge-v0@judge" in out
    for step in lines(run / "metrics.jsonl"):
        keys = {k for k in step if "/adv/" in k and k.endswith("/count")}
        # the responder's learner saw Kuhn's second seat only; the run's learner every other
        # trained seat, and nobody the frozen judge
        responder = {k for k in keys if k.startswith("learner/responder/")}
        assert responder == {"learner/responder/adv/kuhn-poker-v0/player_1/count"}
        main = keys - responder
        assert "learner/adv/kuhn-poker-v0/player_0/count" in main
        assert not any("player_1" in k or "judge" in k for k in main), main
        assert step["learner/responder/version"] == step["step"]
    episodes = lines(run / "transcripts.jsonl")
    judged = [e for e in episodes if "judge" in e["seats"]]
    assert judged and all(e["seats"]["judge"].startswith("judge") for e in judged)


@pytest.mark.e2e
def test_both_policies_checkpoint_and_a_resume_continues_both(run: Path) -> None:
    main = run / "checkpoints"
    responder = main / "policies" / "responder"
    for folder in (main, responder):
        assert sorted(p.name for p in folder.glob("step-*")) == ["step-00000001", "step-00000002"]
    assert not (main / "policies" / "judge").exists()  # frozen: no learner, no checkpoint
    # the resumed run's second step moved each model's weights
    for folder in (main, responder):
        before, after = weights(folder / "step-00000001"), weights(folder / "step-00000002")
        assert any(not torch.equal(before[k], after[k]) for k in before), folder
    assert "resum" in (run / "resumed.out").read_text().lower()
    assert lines(run / "metrics.jsonl")[-1]["step"] == 2
