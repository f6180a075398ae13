"""Run: .venv/bin/python -m pytest -q tests/arena/run/test_shared_lora_serving.py

``arena train`` serves a shared policy trained with ``learner.lora`` unmerged on the ``hf``
backend: the learner publishes its adapter alone and every inference actor plays it as the
default adapter, starting from a fresh one (the base exactly); other backends take the merged
weights as before.
"""

from __future__ import annotations

from pathlib import Path

from arena.models.adapter_shape import SHARED_ADAPTER
from arena.models.lora_files import read_adapter
from arena.run.config import load_run_config
from arena.run.inference_actors import POOL
from arena.run.processes import actor_commands, write_configs
from arena.run.run_dir import resolve_for_run
from tests.served import served_by


def resolved(tmp_path: Path, *overrides: str):
    config = load_run_config(None, ["model=tiny", "learner.lora.enabled=true", *overrides])
    return resolve_for_run(config, tmp_path)


def test_the_hf_backend_serves_the_shared_adapter_unmerged(tmp_path: Path) -> None:
    config = resolved(tmp_path)
    assert config.learner.lora.serve == "adapter"
    assert config.inference.default_adapter == SHARED_ADAPTER
    shape, state = read_adapter(config.inference.adapters[SHARED_ADAPTER], "tiny")
    assert shape.r == config.learner.lora.r
    assert all(float(t.abs().sum()) == 0 for k, t in state.items() if "lora_B" in k)  # fresh
    write_configs(config, tmp_path)
    (argv,) = [c.argv for c in actor_commands(config, tmp_path) if c.name == "inference-0"]
    served = served_by(argv)
    assert served.default_adapter == SHARED_ADAPTER
    assert served.adapters == config.inference.adapters


def test_the_population_pool_and_other_backends_take_merged_weights(tmp_path: Path) -> None:
    config = resolved(tmp_path, "inference.backend=vllm")
    assert config.learner.lora.serve == "merged" and not config.inference.default_adapter
    pool = resolved(tmp_path / "pop", "opponents.mode=population")
    write_configs(pool, tmp_path / "pop")
    (argv,) = [c.argv for c in actor_commands(pool, tmp_path / "pop") if c.name == "inference-pool"]
    served = served_by(argv)
    assert (served.name, served.adapters, served.default_adapter) == (POOL, {}, "")
