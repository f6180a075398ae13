"""Several models in one run, through ``arena train``: Kuhn's second seat on a model of its own
with a learner of its own, mae-v0's judge on a frozen model of its own, the rest on the shared
policy; each learner trains only its own policy's turns, both checkpoint, and a resume continues
both; Kuhn's exploitability is read with each seat on its own policy's weights; the responder
samples at a temperature of its own and its learner re-scores its turns at it.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_bases.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.cli import ENV, ROOT, arena

CONFIG = f"""
extends: {ROOT}/configs/two_models.yaml
model: tiny
rollout: {{actors: 1, episodes_per_step: 8}}
eval: {{exploitability: true, temperature: 1.0}}  # and a read with the responder at T = 0.5
policies:
  responder: {{sampling: {{temperature: 0.5}}}}  # its learner re-scores its turns at T = 0.5
  judge: {{sampling: {{temperature: 0}}}}        # frozen: greedy
"""


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def weights(step_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(step_dir / "model" / "model.safetensors"))


def learner_pids(run_dir: Path, name: str) -> list[int]:
    """The processes of the run's ``learner-<policy>`` (its config file names it)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if f"{run_dir}/learner-{name}.yaml" in cmdline:
            found.append(int(pid))
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two steps; the responder's learner is killed once step 1 is logged (the launcher
    restarts it from its checkpoint). Then a resume trains a third."""
    tmp = tmp_path_factory.mktemp("bases")
    config = tmp / "two.yaml"
    config.write_text(CONFIG)
    run_dir = tmp / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "train", str(config), f"run_dir={run_dir}", "steps=2"],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (run_dir / "metrics.jsonl").exists() or not learner_pids(run_dir, "responder"):
            assert proc.poll() is None, proc.stdout.read()[-3000:] if proc.stdout else ""
            assert time.monotonic() < deadline, "no step 1 in 300 s"
            time.sleep(0.2)
        for pid in learner_pids(run_dir, "responder"):
            os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-4000:]
    (run_dir / "first.out").write_text(out)
    resumed = arena("train", str(config), f"resume={run_dir}", "steps=3")
    assert resumed.returncode == 0, resumed.stderr[-3000:] + resumed.stdout[-3000:]
    (run_dir / "resumed.out").write_text(resumed.stdout)
    return run_dir


@pytest.mark.e2e
def test_each_learner_trains_only_its_own_policys_turns(run: Path) -> None:
    out = (run / "first.out").read_text()
    assert "player_0=player-v0@main player_1=player-v0@responder" in out
    assert "judge=judge-v0@judge" in out
    rows = lines(run / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3]
    for step in rows:
        keys = {k for k in step if "/adv/" in k and k.endswith("/count")}
        # the responder's learner saw Kuhn's second seat only; the run's learner every other
        # trained seat, and nobody the frozen judge
        responder = {k for k in keys if k.startswith("learner/responder/")}
        assert responder <= {"learner/responder/adv/kuhn-poker-v0/player_1/count"}
        main = keys - responder
        assert "learner/adv/kuhn-poker-v0/player_0/count" in main
        assert not any("player_1" in k or "judge" in k for k in main), main
    assert sum("learner/responder/adv/kuhn-poker-v0/player_1/count" in r for r in rows) >= 2
    episodes = lines(run / "transcripts.jsonl")
    judged = [e for e in episodes if "judge" in e["seats"]]
    assert judged and all(e["seats"]["judge"].startswith("judge") for e in judged)


@pytest.mark.e2e
def test_a_killed_policy_learner_restarts_while_the_run_trains_on(run: Path) -> None:
    events = (run / "events.log").read_text()
    assert "policy responder: the learner restarted" in events
    assert "the other policies keep training" in events
    # the run's own learner never restarted: its steps and versions went on, one per step
    rows = lines(run / "metrics.jsonl")
    assert [r["learner/version"] for r in rows] == [1, 2, 3]
    # the responder's learner numbers each step it takes as the run's, restarted or not
    stepped = [r for r in rows if "learner/responder/step" in r]
    assert stepped and all(r["learner/responder/step"] == r["step"] for r in stepped), rows


@pytest.mark.e2e
def test_both_policies_checkpoint_and_a_resume_continues_both(run: Path) -> None:
    main = run / "checkpoints"
    responder = main / "policies" / "responder"
    steps = sorted(p.name for p in responder.glob("step-*"))
    assert not (main / "policies" / "judge").exists()  # frozen: no learner, no checkpoint
    assert "step-00000003" in {p.name for p in main.glob("step-*")}
    # the resumed run's step moved each model's weights past their last checkpoints before it
    last_main = sorted(p.name for p in main.glob("step-*"))
    for folder, names in ((main, last_main), (responder, steps)):
        before, after = weights(folder / names[-2]), weights(folder / names[-1])
        assert any(not torch.equal(before[k], after[k]) for k in before), folder
    assert lines(run / "metrics.jsonl")[-1]["step"] == 3


@pytest.mark.e2e
def test_kuhn_is_read_with_each_seat_on_its_own_policys_weights(run: Path) -> None:
    rows = [r for r in lines(run / "evals.jsonl") if r["label"] == "strategy"]
    readings = [x for r in rows for x in r["readings"] if x["game"] == "kuhn-poker-v0"]
    by_label: dict[str, list[dict]] = {}
    for reading in readings:
        by_label.setdefault(reading["label"], []).append(reading)
    assert {"before", "after"} <= set(by_label), sorted(by_label)
    # every seat at eval.temperature, then each at its policy's: the responder's T = 0.5
    for label in ("before", "after"):
        assert {r["sampling"] for r in by_label[label]} == {False, True}, label
    for reading in readings:
        own = {"player_1": 0.5} if reading["sampling"] else {}
        assert (reading["temperature"], reading["seat_temperatures"]) == (1.0, own), reading
    for reading in readings:
        assert 0.0 <= reading["exploitability"] <= 1.0, reading["exploitability"]
        assert reading["invalid_mass"] == 0.0  # Kuhn acts by choice here
        assert len(reading["policy"]) == 12
        # the judge plays mae-v0 only: Kuhn's second seat is the responder's, nothing else
        assert set(reading["policies"]) == {"responder"}
    assert all(r["policies"]["responder"] == "tiny" for r in by_label["before"])
    assert all(r["model"] == "tiny" and r["step"] == 0 for r in by_label["before"])
    # after training: the responder's newest checkpoint at or before the run's final step
    own = run / "checkpoints" / "policies" / "responder"
    for reading in by_label["after"]:
        path = Path(reading["policies"]["responder"])
        assert path.name == "model" and path.parent.parent == own.resolve(), path
        assert int(path.parent.name.removeprefix("step-")) <= reading["step"]
        assert Path(reading["model"]).parent.parent == run / "checkpoints"
    assert max(r["step"] for r in by_label["after"]) == 3


@pytest.mark.e2e
def test_each_policy_samples_and_is_rescored_at_its_own_temperature(run: Path) -> None:
    out = (run / "first.out").read_text()
    assert "full weights); samples with temperature=0.5 (the run's sampling otherwise)" in out
    assert "its turns are not trained); samples with temperature=0 (the run's" in out
    # the responder's learner re-scores its Kuhn turns at the T = 0.5 they were sampled at;
    # the run's learner stays at the run's T = 1
    assert "temperature: 0.5\n" in (run / "learner-responder.yaml").read_text()
    assert "temperature: 1.0\n" in (run / "learner.yaml").read_text()
    # so the sampler's and the learner's logprobs of the played replies agree (before any
    # update of the step): 0.0 here; a learner at T = 1 for these T = 0.5 samples measured
    # 0.0018 (and a mean importance weight of 0.94 where it is 1 here)
    kl = [
        r["learner/responder/sampler_kl"]
        for r in lines(run / "metrics.jsonl")
        if "learner/responder/sampler_kl" in r
    ]
    assert kl and max(kl) < 1e-4, kl


@pytest.mark.e2e
def test_arena_eval_plays_each_seat_with_the_policy_that_played_it_in_the_run(
    run: Path, tmp_path: Path
) -> None:
    """``arena eval RUN`` (the run's newest step, 3): Kuhn's player_0 on the shared policy's
    checkpoint, player_1 on the responder's own, mae-v0's judge on the frozen model, each row
    under its policy's name; ``RUN:responder`` plays only the responder's seat."""
    out = tmp_path / "eval.json"
    done = arena("eval", str(run), "--n", "2", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    responder = run / "checkpoints/policies/responder/step-00000003/model"
    assert f"  responder: hf model {responder}; plays kuhn-poker-v0 player_1" in done.stdout
    assert "  judge: hf model tiny, frozen (train: false); plays mae-v0 judge" in done.stdout
    rows = json.loads(out.read_text())
    kuhn = {(r["policy"], r["games"]) for r in rows if r["game"] == "kuhn-poker-v0"}
    assert kuhn == {("main", 2), ("responder", 2)}
    roles = {(r["seat"], r["policy"]) for r in rows if r["game"] == "mae-v0"}
    assert roles == {("proposer", "main"), ("solver_0", "main"), ("judge", "judge")}
    alone = arena("eval", f"{run}:responder", "--n", "2")
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert "policy responder of its run, in the seats it plays there, kuhn-poker-v0 player_1" in (
        alone.stdout
    )
    assert "mae-v0: responder@step-3 plays no seat of it in its run; not evaluated" in alone.stdout
    (row,) = [line for line in alone.stdout.splitlines() if " vs random-v0" in line]
    assert row.startswith("kuhn-poker-v0 vs random-v0, policy responder: score")
