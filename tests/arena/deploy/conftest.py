"""Fixtures of the ``arena deploy`` tests: a key directory and the command, run in process;
and what a local run's inference actors serve, to compare a cluster's with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from zmq.auth import load_certificate

from arena.bus.keys import generate_keys
from arena.cli import main
from arena.policies.config import InferenceConfig
from arena.run.config import load_run_config
from arena.run.inference_actors import started_inference
from arena.run.run_dir import resolve_for_run

ROOT = Path(__file__).resolve().parents[3]


class Result(NamedTuple):
    code: int
    out: str
    err: str


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A key directory as ``arena keys generate`` writes it."""
    directory = tmp_path / "keys"
    generate_keys(directory)
    return directory


@pytest.fixture
def secrets(keys: Path) -> list[str]:
    """The secret keys (z85) of ``keys``: what no generated file may hold in the clear."""
    found = []
    for path in sorted(keys.glob("*.key_secret")):
        _, secret = load_certificate(path)
        assert secret is not None
        found.append(secret.decode())
    return found


@pytest.fixture
def deploy(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``arena deploy ARGS...`` in this process; its exit code and output."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(["deploy", *args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


CASES = {
    "shared-lora": ["configs/selfplay.yaml"],
    "adapter-policies": ["configs/kuhn_lora.yaml", "opponents.mode=population"],
    "own-models": [
        "configs/two_models.yaml",
        "model=tiny",
        "policies.responder.lora={r: 4}",
        "opponents.mode=population",
    ],
}
"""Configs whose inference actors serve adapters: ``learner.lora`` on the ``hf`` backend (the
shared policy's adapter, served by default), named policies' adapters on the shared base
(served beside it, and by the pool actor), and a policy on a model of its own with an adapter."""


def local_inference(config_and_overrides: list[str], run_dir: Path) -> dict[str, InferenceConfig]:
    """What each inference actor of a local ``arena train`` of the config in ``run_dir``
    serves (:func:`started_inference` of the config resolved for the run, as
    arena/run/train.py resolves it; the adapters named, not written)."""
    config = resolve_for_run(
        load_run_config(ROOT / config_and_overrides[0], config_and_overrides[1:]),
        run_dir,
        write=False,
    )
    return started_inference(config, run_dir)


def comparable(config: InferenceConfig) -> InferenceConfig:
    """``config`` less what differs by where it runs: the broker's address, the device (a local
    run resolves ``auto`` before it starts an actor, a cluster's node when it does) and the
    run's own actor count (0 in the coordinator's config.yaml, which starts none)."""
    return replace(config, address="", device="auto", actors=0)


ADAPTERS = {
    "shared-lora": {"inference-0": ("shared-lora", {"shared-lora": "adapters/shared-lora"})},
    "adapter-policies": {
        "inference-0": ("", {"poker": "adapters/poker"}),
        "inference-pool": ("", {"poker": "adapters/poker"}),
    },
    "own-models": {
        "inference-0": ("", {}),
        "inference-pool": ("", {}),
        "inference-responder": (
            "shared-lora",
            {"shared-lora": "adapters/policies/responder/shared-lora"},
        ),
        "inference-judge": ("", {}),
        "inference-pool-responder": ("", {}),
    },
}
"""Worked out from arena/run/run_dir.py and arena/run/inference_actors.py: each case's inference
actors, the adapter each serves by default and the adapters it serves (paths in the run
directory)."""


def adapters_of(served: dict[str, InferenceConfig], run_dir: Path) -> dict[str, Any]:
    """Actor -> (default adapter, adapter name -> path relative to ``run_dir``)."""
    return {
        name: (
            c.default_adapter,
            {a: str(Path(p).relative_to(run_dir)) for a, p in c.adapters.items()},
        )
        for name, c in served.items()
    }
