"""Which processes a run starts, and with which command lines (arena/run/processes.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_processes.py``. Every process of
a run is an ``arena`` subcommand; an inference actor reads what it serves from the run's
config.yaml, so a local run and a hand-started one are the same program.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from arena.run.config import load_run_config
from arena.run.processes import actor_commands, write_configs
from arena.run.run_dir import resolve_for_run
from tests.served import served_by

ROOT = Path(__file__).resolve().parents[3]


def commands_for(tmp_path: Path, *overrides: str) -> dict[str, object]:
    config = load_run_config(ROOT / "configs/smoke.yaml", ["cpu_threads=1", *overrides])
    config = resolve_for_run(config, tmp_path)
    write_configs(config, tmp_path)
    return {c.name: c for c in actor_commands(config, tmp_path)}, config  # type: ignore[return-value]


def test_a_run_starts_a_broker_inference_learner_and_rollout_actors(tmp_path: Path) -> None:
    commands, config = commands_for(tmp_path, "rollout.actors=2", "inference.actors=2")
    assert list(commands) == [
        "broker",
        "inference-0",
        "inference-1",
        "learner",
        "rollout-0",
        "rollout-1",
    ]
    address = f"ipc://{tmp_path.resolve()}/bus.sock"
    assert commands["broker"].argv[:3] == ["broker", "--bind", address]
    assert commands["learner"].argv == [
        "-v",
        "learner",
        "--address",
        address,
        "--config",
        str(tmp_path / "learner.yaml"),
    ]
    assert commands["rollout-1"].argv[-2:] == ["--index", "1"] and commands["rollout-1"].restartable
    assert commands["learner"].restartable and commands["learner"].max_restarts == 3
    assert commands["inference-0"].restartable and commands["inference-0"].max_restarts == 3
    assert commands["inference-0"].env == {"OMP_NUM_THREADS": "1"}


def test_an_inference_actor_reads_what_it_serves_from_the_runs_config(tmp_path: Path) -> None:
    config = load_run_config(
        ROOT / "configs/smoke.yaml",
        ["inference.max_wait_ms=7.5", "inference.shm_weights=false", "inference.actors=2"],
    )
    engine = {"max_model_len": 512, "enforce_eager": True, "kv_cache_dtype": "auto"}
    config = resolve_for_run(
        replace(config, inference=replace(config.inference, engine=engine)), tmp_path
    )
    write_configs(config, tmp_path)
    argv = {c.name: c.argv for c in actor_commands(config, tmp_path)}["inference-1"]
    address = f"ipc://{tmp_path.resolve()}/bus.sock"
    config_file = str(tmp_path / "config.yaml")
    assert argv == [
        *("-v", "inference", "--address", address),
        *("--config", config_file, "--actor-name", "inference-1"),
    ]
    served = served_by(argv)
    # the run's inference section, as inference-1: the learner's policy, the model, seed + 1
    assert served == replace(
        config.inference, name="main", model="tiny", seed=config.seed + 1, address=address
    )
    assert served.max_wait_ms == 7.5 and served.shm_weights is False and served.engine == engine
    assert served.device == "auto"  # resolved by the actor, on its own host


def test_population_mode_adds_the_pool_inference_actor(tmp_path: Path) -> None:
    commands, _ = commands_for(tmp_path, "opponents.mode=population")
    assert served_by(commands["inference-pool"].argv).name == "pool"
