"""One inference actor serving its base and named LoRA adapters (``--adapter NAME=PATH``), in a
real process behind a real broker: requests pick an adapter, a request for one the actor does
not hold fails alone, and an adapter made for another base stops the actor with both names.

Run with ``.venv/bin/python -m pytest -q tests/arena/actors/test_inference_adapters.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from arena.bus import BlockingActor, BusError
from arena.models import tiny_model
from arena.models.adapter_shape import AdapterShape
from arena.models.lora import adapter_parameters, add_adapters
from arena.models.lora_files import save_adapter
from arena.policies.remote import RemotePolicy
from arena.policies.types import Generation, SamplingParams
from tests.arena.bus.conftest import spawn, spawn_broker, stop, wait_for_service

PROMPT = {"ids": np.array([1, 9690, 198, 42, 7], np.int32)}
GREEDY = {"temperature": 0.0, "max_new_tokens": 5}


@pytest.fixture(scope="module")
def adapter_dir() -> Iterator[Path]:
    """A solver adapter for the tiny model, moved far enough from the base to change replies."""
    folder = Path(tempfile.mkdtemp(prefix="arena-adapter-"))
    model, _ = tiny_model(seed=0)
    add_adapters(model, ["solver"], AdapterShape(r=4, alpha=8.0))
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for param in adapter_parameters(model, "solver"):
            param.add_(torch.randn(param.shape, generator=generator) * 0.5)
    save_adapter(folder / "solver", model, "solver", base="tiny")
    yield folder / "solver"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def served(adapter_dir: Path) -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="arena-", dir="/tmp")
    address = f"ipc://{folder}/b.sock"
    broker = spawn_broker(address)
    actor = spawn(
        "-m", "arena", "inference", "--address", address, "--model", "tiny", "--name", "main",
        "--dtype", "float32", "--adapter", f"solver={adapter_dir}",
    )  # fmt: skip
    wait_for_service(address, "policy:main", timeout=120)
    yield address
    stop(actor)
    stop(broker)
    shutil.rmtree(folder, ignore_errors=True)


def ask(client: BlockingActor, **params: object) -> Generation:
    body = {"prompt": PROMPT, "params": {**GREEDY, **params}}
    return Generation.from_dict(client.call(body, service="policy:main", timeout=60))


def test_requests_pick_their_adapter_and_an_unknown_one_fails_alone(served: str) -> None:
    with BlockingActor("adapter-client", served) as client:
        base, solver = ask(client), ask(client, adapter="solver")
        assert base.token_ids.tolist() != solver.token_ids.tolist()
        with pytest.raises(
            BusError, match="holds no adapter named 'judge'; it holds solver"
        ) as err:
            ask(client, adapter="judge")
        assert err.value.code == "unknown_adapter"
        assert ask(client, adapter="solver").token_ids.tolist() == solver.token_ids.tolist()
    with RemotePolicy.connect(served, "main") as policy:
        replies = [np.array([5, 6]), np.array([7])]
        by_solver, by_base = policy.score([PROMPT["ids"]] * 2, [replies] * 2, ["solver", None])
        alone = policy.generate([PROMPT["ids"]], SamplingParams(**GREEDY, adapter="solver"))
    assert not np.allclose(by_solver.logprobs[0], by_base.logprobs[0], atol=1e-3)
    assert alone[0].token_ids.tolist() == solver.token_ids.tolist()


def test_an_adapter_for_another_base_stops_the_actor_naming_both(adapter_dir: Path) -> None:
    folder = tempfile.mkdtemp(prefix="arena-", dir="/tmp")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "arena", "inference", "--address", f"ipc://{folder}/none.sock",
             "--model", "smollm2-135m", "--adapter", f"solver={adapter_dir}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode != 0
    assert "made for base model 'tiny', but the served base is 'smollm2-135m'" in done.stderr
    assert "Traceback" not in done.stderr
