"""One inference actor serving its base and named LoRA adapters (``--adapter NAME=PATH``), in a
real process behind a real broker: requests pick an adapter, a request for one the actor does
not hold fails alone, an adapter made for another base stops the actor with both names, and a
``load`` control message swaps the adapters served (the population pool actor's).

Run with ``.venv/bin/python -m pytest -q tests/arena/actors/test_inference_adapters.py``.
"""

from __future__ import annotations

import json
import queue
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
from arena.models.lora_files import CONFIG_FILE, save_adapter
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


def test_load_serves_other_adapters_under_their_names_as_a_version(
    served: str, adapter_dir: Path, tmp_path: Path
) -> None:
    """The pool actor of a population run with named policies: ``load`` with ``adapters``
    serves a checkpoint's adapters under their names (any version, older ones too); an
    adapter it does not serve, or one made for another base, is refused and nothing changes."""
    model, _ = tiny_model(seed=0)
    add_adapters(model, ["solver"], AdapterShape(r=4, alpha=8.0))
    save_adapter(tmp_path / "fresh", model, "solver", base="tiny")  # B = 0: the base exactly
    other = tmp_path / "other"
    shutil.copytree(adapter_dir, other)
    config = json.loads((other / CONFIG_FILE).read_text())
    (other / CONFIG_FILE).write_text(json.dumps({**config, "base_model_name_or_path": "x"}))
    acks: queue.Queue[dict] = queue.Queue()

    def ack(version: int) -> dict:
        while (body := acks.get(timeout=60))["version"] != version:
            pass
        return body

    client = BlockingActor("pool-loader", served)
    client.actor.subscribe("weights_ack.main", lambda m: acks.put(m.body))
    with client:
        base, solver = ask(client), ask(client, adapter="solver")

        def load(version: int, **adapters: Path) -> dict:
            paths = {name: str(path) for name, path in adapters.items()}
            body = {"command": "load", "adapters": paths, "version": version}
            client.publish("control.policy.main", body)
            return ack(version)

        done = load(5, solver=tmp_path / "fresh")
        assert (done["applied"], done["transport"], done["serving"]) == (True, "load", 5)
        fresh = ask(client, adapter="solver")
        assert fresh.version == 5 and fresh.token_ids.tolist() == base.token_ids.tolist()
        for version, adapters, reason in [
            (6, {"judge": tmp_path / "fresh"}, "adapter 'judge', which main does not serve"),
            (7, {"solver": other}, "made for base model 'x', but the served base is 'tiny'"),
            (8, {"solver": tmp_path / "missing"}, "is not an adapter"),
        ]:
            refused = load(version, **adapters)
            assert (refused["applied"], refused["serving"]) == (False, 5), refused
            assert reason in refused["reason"], refused
        assert ask(client, adapter="solver").token_ids.tolist() == base.token_ids.tolist()
        back = load(2, solver=adapter_dir)  # an older version is served as asked
        assert back["applied"] and back["serving"] == 2
        again = ask(client, adapter="solver")
        assert again.version == 2 and again.token_ids.tolist() == solver.token_ids.tolist()
