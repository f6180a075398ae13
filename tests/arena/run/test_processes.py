"""Which processes a run starts, and with which command lines (arena/run/processes.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_processes.py``. Every process of
a run is an ``arena`` subcommand; the flags handed to ``arena inference`` must parse back into
the run's own inference section, so a local run and a hand-started one are the same program.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from arena.commands import inference as inference_command
from arena.core.config import from_arguments, parse_assignments
from arena.policies.config import InferenceConfig
from arena.run.config import load_run_config
from arena.run.processes import actor_commands
from arena.run.run_dir import resolve_for_run

ROOT = Path(__file__).resolve().parents[3]


def commands_for(tmp_path: Path, *overrides: str) -> dict[str, object]:
    config = load_run_config(ROOT / "configs/smoke.yaml", ["cpu_threads=1", *overrides])
    config = resolve_for_run(config, tmp_path)
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


def test_inference_flags_parse_back_into_the_runs_inference_section(tmp_path: Path) -> None:
    config = load_run_config(
        ROOT / "configs/smoke.yaml", ["inference.max_wait_ms=7.5", "inference.shm_weights=false"]
    )
    engine = {"max_model_len": 512, "enforce_eager": True, "kv_cache_dtype": "auto"}
    config = resolve_for_run(
        replace(config, inference=replace(config.inference, engine=engine)), tmp_path
    )
    argv = actor_commands(config, tmp_path)[1].argv
    assert argv[:2] == ["-v", "inference"]
    parser = argparse.ArgumentParser()
    inference_command.add_arguments(parser)
    args = parser.parse_args(argv[2:])
    served = from_arguments(
        InferenceConfig, args, address=args.address, engine=parse_assignments(args.engine)
    )
    expected = config.inference
    for name in (
        "backend",
        "model",
        "name",
        "dtype",
        "max_batch",
        "max_wait_ms",
        "max_queue",
        "weight_timeout",
        "shm_weights",
        "attention",
        "engine",
    ):
        assert getattr(served, name) == getattr(expected, name), name
    assert served.max_wait_ms == 7.5 and served.shm_weights is False
    assert served.device in ("cpu", "cuda")  # "auto" is resolved before the actor starts


def test_population_mode_adds_the_pool_inference_actor(tmp_path: Path) -> None:
    commands, _ = commands_for(tmp_path, "opponents.mode=population")
    pool = commands["inference-pool"].argv
    assert pool[pool.index("--name") + 1] == "pool"
