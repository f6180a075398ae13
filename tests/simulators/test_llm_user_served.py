"""The LLM user simulator on a policy of its own, served apart from the trained one, under
``arena train`` as a user would run it: the run waits for ``policy:<name>`` and says how to
start it; an ``arena inference --name NAME`` process started by hand serves the user's turns;
the run trains, and the frozen user's weights never change.

Run with ``.venv/bin/python -m pytest -q tests/simulators/test_llm_user_served.py`` (slow:
about two minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.run.addresses import local_address
from tests.arena.commands.test_train_role_games import TINY

ROOT = Path(__file__).resolve().parents[2]
USER_POLICY = "user-sim"


def wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        if proc.poll() is not None:
            pytest.fail(f"exited {proc.returncode} before {text!r}:\n{path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {text!r} in {timeout:g}s:\n{path.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.mark.slow
def test_an_llm_user_on_a_separately_served_frozen_policy(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train_out, user_out = tmp_path / "train.out", tmp_path / "user.out"
    train_argv = [
        sys.executable,
        "-m",
        "arena",
        "train",
        "configs/user_tool_use.yaml",
        f"run_dir={run_dir}",
        *TINY,
        "rollout.group_size=2",
        "sampling.max_new_tokens=12",
        "games.0.simulators.user.id=llm-user-v0",
        f"games.0.simulators.user.policy={USER_POLICY}",
        "games.0.simulators.user.kwargs.max_turns=2",
        "wait.timeout=300",
    ]
    procs: list[subprocess.Popen] = []
    try:
        with open(train_out, "w") as out:
            train = subprocess.Popen(train_argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        procs.append(train)
        # the run names what it waits for, with the command that starts it
        wait_for(train_out, f"an inference actor serving policy:{USER_POLICY}", train, 240)
        address = local_address(run_dir)
        assert f"arena inference --connect {address} --name {USER_POLICY}" in train_out.read_text()
        user_argv = [
            sys.executable,
            "-m",
            "arena",
            "-v",
            "inference",
            "--connect",
            address,
            "--name",
            USER_POLICY,
            "--model",
            "tiny",
            "--dtype",
            "float32",
        ]
        with open(user_out, "w") as out:
            procs.append(subprocess.Popen(user_argv, stdout=out, stderr=subprocess.STDOUT))
        try:
            train.wait(timeout=420)
        except subprocess.TimeoutExpired:
            pytest.fail("arena train did not finish:\n" + train_out.read_text()[-3000:])
        assert train.returncode == 0, train_out.read_text()[-4000:] + user_out.read_text()[-2000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    transcripts = [json.loads(x) for x in (run_dir / "transcripts.jsonl").read_text().splitlines()]
    assert all(t["seats"]["user"] == "llm-user-v0 (not trained)" for t in transcripts)
    turns = [turn for t in transcripts for turn in t["turns"]]
    users = [t for t in turns if t["seat"] == "user"]
    # the user's words came from policy:user-sim (the only actor serving it: without it no
    # episode could finish), recorded as the simulated user's, never trained
    assert users and all(t["role"] == "simulated_user" and t["text"] for t in users)
    assert {t["version"] for t in turns if t["seat"] == "agent"} >= {0, 1}
    # the frozen actor never took the learner's weights
    user_log = user_out.read_text()
    assert f"serves policy:{USER_POLICY}" in user_log
    assert "serves version" not in user_log, user_log[-3000:]
