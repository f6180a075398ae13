"""A run repeats from its seed, whatever the machine's load: the same config and seed twice, the
second beside a CPU burner, play the same episodes and train the same steps.

Load changes the order in which requests reach the inference service; each request carries its
own sampling seed (from its episode and turn: ``arena.play.seats.request_seed``), and the
learner trains on a step's turns in episode order, so neither the order of the requests nor that
of the arrivals reaches the result. Compared: every step's transcript (text, actions, rewards)
exactly; the per-step rewards and the learner's numbers to 1e-4.

The runs serve one request at a time (``inference.max_batch=1``): load also changes which
requests share a batch, and a row's log-probabilities then differ in the last bits (about 1e-6
on the tiny model), which now and then moves a sampled token across the edge of the next one
in a near-flat distribution of 49152. With batches of 16 the two runs here differed in one
reply of the first step, after a change to no more than how fast the actors start.

The runs evaluate nothing (``eval.games=0``, ``eval.exploitability=false``); the first also
checks that such a run writes no evaluation and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORES = os.cpu_count() or 2
COMPARED = (
    "learner/loss",
    "learner/pg_loss",
    "learner/entropy",
    "learner/samples",
    "learner/tokens",
)


def run(run_dir: Path) -> subprocess.CompletedProcess:
    overrides = ["seed=7", "games.1.act=choice", "eval.games=0", "eval.exploitability=false"]
    overrides.append("inference.max_batch=1")  # see the module's docstring
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "arena",
            "train",
            "configs/smoke.yaml",
            *overrides,
            f"run_dir={run_dir}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.e2e
def test_a_run_repeats_from_its_seed_under_load(tmp_path: Path) -> None:
    quiet = run(tmp_path / "quiet")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    # eval.games=0 and no strategy read: nothing is evaluated, and the summary says so
    nothing = "No evaluation results (eval.games: 0 skips every evaluation)."
    assert not (tmp_path / "quiet" / "evals.jsonl").exists()
    assert nothing in quiet.stdout
    assert (tmp_path / "quiet" / "eval_summary.md").read_text().endswith(nothing + "\n")
    burn = "import time\nend = time.time() + 600\nwhile time.time() < end: pass"
    # a burner on half the cores: the run's own processes outnumber the rest, so its batches
    # form otherwise than in the quiet run; burning every core would also slow the suite's
    # other tests, which share this machine
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(CORES // 2 or 1)]
    try:
        loaded = run(tmp_path / "loaded")
    finally:
        for burner in burners:
            burner.kill()
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    a, b = (lines(tmp_path / name / "transcripts.jsonl") for name in ("quiet", "loaded"))
    assert len(a) == len(b) == 2
    for x, y in zip(a, b, strict=True):
        assert x["id"] == y["id"] and x["final_rewards"] == y["final_rewards"]
        for s, t in zip(x["turns"], y["turns"], strict=True):
            assert (s["text"], s["action"], s["reward"]) == (t["text"], t["action"], t["reward"])
    ma, mb = (lines(tmp_path / name / "metrics.jsonl") for name in ("quiet", "loaded"))
    assert [m["step"] for m in ma] == [m["step"] for m in mb] == [1, 2]
    for x, y in zip(ma, mb, strict=True):
        rewards = [k for k in x if k.startswith(("reward/", "invalid_rate/"))]
        assert rewards and all(x[k] == pytest.approx(y[k], abs=1e-4) for k in rewards)
        for key in COMPARED:
            assert x[key] == pytest.approx(y[key], rel=1e-4, abs=1e-6), key
