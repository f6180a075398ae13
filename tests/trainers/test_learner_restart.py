"""A learner process killed with SIGKILL and started again resumes from its checkpoint.

A real ``arena learner`` process on a real broker, and weight receivers on the bus that check
every bucket as an inference actor does (:class:`WeightAssembler`): the learner trains three
steps (checkpoints every two), dies with version 3 served, and a new process takes its place.
Its version is the checkpoint's (2), its start publish rolls the receiver back to exactly the
checkpoint's weights, a receiver that joins after it gets them too, an episode sampled under
version 3 (the dead learner's weights) is discarded, counted and logged, and training goes on
from step 2.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_learner_restart.py``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from synthetic import two_seat_episodes

from arena.bus import BlockingActor, Broker, BusError
from arena.weights.assembler import WeightAssembler

ROOT = Path(__file__).resolve().parents[2]

LEARNER_YAML = """\
model: tiny
optim: {lr: 1.0e-3}
bucket_bytes: 1048576
batch: {micro_batch_tokens: 256, max_seq_len: 64, batch_samples: 0}
checkpoint: {dir: CKPT, every: 2, resume: true}
"""


def start_learner(address: str, config: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "arena",
                "-v",
                "learner",
                "--address",
                address,
                "--config",
                str(config),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def status(client: BlockingActor, timeout: float = 120.0) -> dict[str, Any]:
    """The learner's status, once one answers (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.call({"op": "status"}, service="learner", timeout=5)
        except BusError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class Receiver:
    """A bus actor that assembles the learner's weights as an inference actor does."""

    def __init__(self, name: str, address: str, served: dict[str, torch.Tensor]) -> None:
        self.assembler = WeightAssembler(served)
        self.assembler.last_version = 0  # what a fresh inference actor serves
        self.updates: queue.Queue = queue.Queue()
        self.actor = BlockingActor(name, address)
        self.actor.actor.subscribe("weights.main", self._on_weights)
        self.actor.start()

    def _on_weights(self, msg: Any) -> None:
        done = self.assembler.add(msg.body)
        if done is not None:
            self.updates.put(done)

    def next_update(self, timeout: float = 60.0) -> tuple[int, dict[str, torch.Tensor]]:
        return self.updates.get(timeout=timeout)


def test_a_restarted_learner_resumes_rolls_back_and_discards_newer_rollouts(
    tmp_path: Path, tiny
) -> None:
    address = f"ipc://{tmp_path}/bus.sock"
    config = tmp_path / "learner.yaml"
    config.write_text(LEARNER_YAML.replace("CKPT", str(tmp_path / "ckpt")))
    log = tmp_path / "learner.log"
    broker = Broker(address)
    broker_thread = threading.Thread(target=broker.serve_forever, daemon=True)
    broker_thread.start()
    served = {k: v.clone() for k, v in tiny[0].state_dict().items()}
    client = BlockingActor("client", address).start()
    first = start_learner(address, config, log)
    processes = [first]
    receivers: list[Receiver] = []
    try:
        before = status(client)
        assert before["version"] == 0 and isinstance(before["epoch"], int)
        receivers.append(Receiver("inference-a", address, served))
        for step in range(3):
            episodes = [e.to_dict() for e in two_seat_episodes(3, start=10 * step, version=step)]
            client.call({"op": "add", "episodes": episodes}, service="learner", timeout=30)
            assert (
                client.call({"op": "step"}, service="learner", timeout=120)["version"] == step + 1
            )
        a = receivers[0]
        while (version := a.next_update()[0]) < 3:
            pass
        assert version == 3 and a.assembler.last_epoch == before["epoch"]

        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        second = start_learner(address, config, log)
        processes.append(second)
        deadline = time.monotonic() + 120
        while (after := status(client))["epoch"] == before["epoch"]:
            assert time.monotonic() < deadline, "the old learner still answers"
            time.sleep(0.5)
        assert after["step"] == 2 and after["version"] == 2 and after["epoch"] > before["epoch"]

        # the served weights roll back to exactly the checkpoint's
        checkpoint = load_file(
            str(tmp_path / "ckpt" / "step-00000002" / "model" / "model.safetensors")
        )
        version, state = a.next_update()
        assert version == 2 and a.assembler.last_epoch == after["epoch"]
        assert all(torch.equal(state[k], checkpoint[k]) for k in checkpoint)
        # and so does one that subscribes after the restarted learner started
        late = Receiver("inference-late", address, served)
        receivers.append(late)
        version, state = late.next_update()
        assert version == 2 and all(torch.equal(state[k], checkpoint[k]) for k in checkpoint)

        # an episode sampled under version 3 (the dead learner's) is discarded and counted
        newer = two_seat_episodes(1, start=100, version=3)[0].to_dict()
        current = [e.to_dict() for e in two_seat_episodes(2, start=200, version=2)]
        client.send("episode", newer, service="learner")
        reply = client.call({"op": "add", "episodes": current}, service="learner", timeout=30)
        assert reply == {"accepted": 2, "rejected": 0}
        deadline = time.monotonic() + 30
        while status(client)["counters"].get("discarded_newer_version", 0) < 1:
            assert time.monotonic() < deadline, "the newer episode was never discarded"
            time.sleep(0.2)
        metrics = client.call({"op": "step"}, service="learner", timeout=120)
        assert metrics["version"] == 3.0 and metrics["step"] == 3.0
        assert metrics["count/discarded_newer_version"] == 1.0
        assert a.next_update()[0] == 3 and late.next_update()[0] == 3
        assert "discarded episode ep100: sampled under version 3" in log.read_text()
    finally:
        for proc in processes:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for receiver in receivers:
            receiver.actor.close()
        client.close()
        broker.stop()
        broker_thread.join(timeout=5)
