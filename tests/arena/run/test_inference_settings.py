"""Inference actors cannot drift from the run's config unnoticed (issue 30, item 12):
``arena inference --config RUN_DIR/config.yaml`` serves with the run's ``inference`` section,
every inference actor publishes its settings, and ``arena train`` names each actor whose settings
differ from its own (arena/run/inference_settings.py, arena/commands/inference.py).

Real ``arena broker``, ``arena inference`` and ``arena train`` processes over ``ipc://``, the
tiny model.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_inference_settings.py``
(about two minutes: the last test is a whole run).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from arena.bus import BlockingActor
from arena.commands import inference as inference_command
from arena.core.config import to_yaml
from arena.policies.config import InferenceConfig
from arena.run.config import load_run_config
from arena.run.directory import listing
from arena.run.inference_settings import SettingsCheck, differences, run_settings

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
OLD_RECIPE = ["--model", "tiny", "--name", "main", "--dtype", "float32"]
"""The README's inference line before: the flags it gave, and none of the run's batching."""


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    inference_command.add_arguments(parser)
    return parser.parse_args(["--connect", "ipc:///tmp/nowhere.sock", *argv])


def write_run_config(tmp_path: Path, *overrides: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(to_yaml(load_run_config(SMOKE, ["seed=7", *overrides])))
    return path


def test_with_config_the_actor_serves_the_runs_inference_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_run_config(tmp_path, "learner.name=champ")
    run = load_run_config(path)
    config, heartbeat = inference_command.served_config(parse("--config", str(path)))
    assert config == replace(
        run.inference, name="champ", model="tiny", seed=7, address="ipc:///tmp/nowhere.sock"
    )
    assert (config.max_batch, config.max_wait_ms, config.dtype) == (16, 10.0, "float32")
    assert heartbeat == 0.5  # the run's bus.heartbeat_interval
    assert capsys.readouterr().err == ""
    # a flag beside it wins, and a shared setting it changes is named; a per-actor one is not
    config, _ = inference_command.served_config(
        parse("--config", str(path), "--max-batch", "8", "--device", "cpu", "--seed", "3")
    )
    assert (config.max_batch, config.device, config.seed, config.max_wait_ms) == (8, "cpu", 3, 10.0)
    err = capsys.readouterr().err
    assert "settings unlike the run's" in err and "max_batch 8 (the run: 16)" in err
    assert "device" not in err and "seed" not in err


def test_without_config_the_flags_and_defaults_are_served_as_before() -> None:
    config, heartbeat = inference_command.served_config(parse(*OLD_RECIPE, "--no-shm-weights"))
    assert config == InferenceConfig(
        model="tiny", dtype="float32", shm_weights=False, address="ipc:///tmp/nowhere.sock"
    )
    assert heartbeat == 1.0


def test_differences_name_each_setting_and_the_check_warns_once_per_actor() -> None:
    run = load_run_config(SMOKE)
    expected = run_settings(run)
    assert expected["max_batch"] == 16 and "seed" not in expected and "device" not in expected
    published = {**expected, "max_batch": 32, "max_wait_ms": 20.0}
    del published["attention"]  # not published (an older actor): not compared
    assert differences(expected, published) == [
        "max_batch 32 (the run: 16)",
        "max_wait_ms 20.0 (the run: 10.0)",
    ]
    said: list[str] = []
    check = SettingsCheck(run, Path("/runs/x"), said.append)
    actor = {"name": "inference-7", "host": "b", "pid": 9, "services": ["policy:main"]}
    listing_ = [
        {**actor, "status": {"settings": published}},
        {**actor, "name": "same", "status": {"settings": expected}},
        {**actor, "name": "no-heartbeat-yet", "status": {}},
        {**actor, "name": "other-policy", "services": ["policy:user"], "status": {"settings": {}}},
    ]
    check(listing_)
    check(listing_)  # the same differences again: no second warning
    assert said == [
        "inference actor inference-7 (b:9) serves policy:main with settings unlike the run's "
        "inference section: max_batch 32 (the run: 16), max_wait_ms 20.0 (the run: 10.0); "
        "`arena inference --config /runs/x/config.yaml` takes the run's"
    ]


def spawn(*argv: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "arena", *argv], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
        )


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.3)


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.e2e
def test_a_run_names_the_inference_actor_started_with_other_settings(
    tmp_path: Path, ipc_dir: str
) -> None:
    address = f"ipc://{ipc_dir}/bus.sock"
    broker = spawn("broker", "--bind", address, log=tmp_path / "broker.log")
    drifted = spawn(
        "inference",
        "--connect",
        address,
        "--actor-name",
        "inference-by-hand",
        *OLD_RECIPE,
        log=tmp_path / "drifted.log",
    )
    path = write_run_config(tmp_path)
    matching = spawn(
        "inference",
        "--connect",
        address,
        "--actor-name",
        "inference-from-config",
        "--config",
        str(path),
        log=tmp_path / "matching.log",
    )
    procs = (matching, drifted, broker)
    try:
        # both publish their settings with their heartbeats
        with BlockingActor("probe", address, kind="status") as probe:

            def published() -> dict[str, dict]:
                actors = probe._run(listing(probe.actor), 10)
                return {
                    a["name"]: a["status"]["settings"]
                    for a in actors
                    if "settings" in (a.get("status") or {})
                }

            wait_until(lambda: len(published()) == 2, 120, "the inference actors never came up")
            settings = published()
        assert settings["inference-from-config"] == run_settings(load_run_config(path))
        assert settings["inference-by-hand"]["max_batch"] == 32
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "arena",
                "train",
                SMOKE,
                f"output_dir={tmp_path}",
                f"bus.address={address}",
                "inference.actors=0",
                "wait.inference_actors=2",
                "steps=1",
                "eval.games=1",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=540,
        )
    finally:
        stop(*procs)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (run_dir,) = (tmp_path / "smoke").iterdir()
    events = (run_dir / "events.log").read_text()
    named = [line for line in events.splitlines() if "settings unlike the run's" in line]
    assert len(named) == 1, events
    assert "inference-by-hand" in named[0]
    assert (
        "max_batch 32 (the run: 16)" in named[0] and "max_wait_ms 20.0 (the run: 10.0)" in named[0]
    )
    assert f"--config {run_dir}/config.yaml" in named[0]
