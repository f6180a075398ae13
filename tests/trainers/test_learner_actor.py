"""The learner actor on a real broker: episodes in, an update, weight buckets and metrics out.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_learner_actor.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from synthetic import two_seat_episodes

from arena.bus import BlockingActor, Broker, BusError
from arena.core.config import load_config
from arena.core.errors import ConfigError
from arena.weights.assembler import WeightAssembler
from trainers.config import LearnerConfig
from trainers.learner import Learner
from trainers.learner_actor import LearnerActor

ROOT = Path(__file__).resolve().parents[2]


class ActorThread:
    """A LearnerActor on its own event loop in a thread, stoppable from the test."""

    def __init__(self, actor: LearnerActor) -> None:
        self.actor = actor
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.actor.run(self.stop))
        except BaseException as err:  # surfaced by the test
            self.error = err

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)


@contextlib.contextmanager
def running_broker(address: str) -> Iterator[Broker]:
    """A broker on ``address``, serving from a thread until the block ends."""
    broker = Broker(address)
    thread = threading.Thread(target=broker.serve_forever, daemon=True)
    thread.start()
    try:
        yield broker
    finally:
        broker.stop()
        thread.join(timeout=5)


def wait_for(q: queue.Queue, predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            item = q.get(timeout=0.2)
        except queue.Empty:
            continue
        if predicate(item):
            return item
    raise AssertionError("timed out waiting on the bus")


def test_learner_actor_end_to_end(tmp_path: Path, fresh_tiny) -> None:
    address = f"ipc://{tmp_path}/bus.sock"
    broker = Broker(address)
    broker_thread = threading.Thread(target=broker.serve_forever, daemon=True)
    broker_thread.start()
    model, tokenizer = fresh_tiny
    config = LearnerConfig.from_dict(
        {
            "optim": {"lr": 1e-3},
            "bucket_bytes": 1 << 20,
            "batch": {"micro_batch_tokens": 256, "max_seq_len": 64, "batch_samples": 12},
            "checkpoint": {"dir": str(tmp_path / "ckpt"), "every": 1000},
        }
    )
    learner = Learner(config, model, tokenizer)
    assembler = WeightAssembler({k: v.clone() for k, v in model.state_dict().items()})
    updates: queue.Queue = queue.Queue()
    metrics: queue.Queue = queue.Queue()

    forms: set[bool] = set()

    def on_weights(msg) -> None:
        forms.add("shm" in msg.body)  # same host: references to a shared-memory file
        done = assembler.add(msg.body)
        if done is not None:
            updates.put(done)

    client = BlockingActor("client", address)
    client.actor.subscribe("weights.main", on_weights)
    client.actor.subscribe("metrics.learner", lambda msg: metrics.put(msg.body))
    client.start()
    server = ActorThread(LearnerActor(learner, address))
    server.thread.start()
    try:
        version, state = wait_for(updates, lambda u: True)  # published once at start
        assert forms == {True}
        assert version == 0 and torch.equal(
            state["model.embed_tokens.weight"], model.model.embed_tokens.weight
        )
        episodes = [e.to_dict() for e in two_seat_episodes(3)]
        bad = dict(episodes[0], id="bad")
        del bad["final_rewards"]
        # One episode per message, then a group in one message (a list, queued as one
        # unit), whose duplicate member is dropped while the others go on.
        for body in [bad, episodes[0], [episodes[0], *episodes[1:]]]:
            client.send("episode", body, service="learner")
        version, state = wait_for(updates, lambda u: u[0] == 1)
        step_metrics = wait_for(metrics, lambda m: m.get("version") == 1.0)
        assert step_metrics["samples"] > 0 and "loss" in step_metrics
        status = client.call({"op": "status"}, service="learner", timeout=10)
        assert status["step"] == 1 and status["version"] == 1
        assert status["warnings"] == []
        assert status["counters"]["rejected_bad_record"] == 1
        assert status["counters"]["rejected_duplicate"] == 1
        exported = learner.export_weights()
        for name, tensor in state.items():
            assert torch.equal(tensor, exported[name]), name
        # Acknowledged input, a forced step, a checkpoint, and a bad op.
        more = [e.to_dict() for e in two_seat_episodes(1, start=40)]
        assert client.call({"op": "add", "episodes": more}, service="learner", timeout=10) == {
            "accepted": 1,
            "rejected": 0,
        }
        forced = client.call({"op": "step"}, service="learner", timeout=60)
        assert forced["version"] == 2.0
        saved = client.call({"op": "checkpoint"}, service="learner", timeout=60)
        assert Path(saved["path"]).name == "step-00000002"
        with pytest.raises(BusError):
            client.call({"op": "dance"}, service="learner", timeout=10)
        # A step asked as the run's step 5 (a policy learner that missed steps 3 and 4) is
        # numbered 5; asked again as 5, it is not taken and its turns wait.
        later = [e.to_dict() for e in two_seat_episodes(2, start=50)]
        client.call({"op": "add", "episodes": later[:1]}, service="learner", timeout=10)
        at_five = client.call({"op": "step", "at": 5}, service="learner", timeout=60)
        assert at_five["version"] == at_five["step"] == 5.0
        client.call({"op": "add", "episodes": later[1:]}, service="learner", timeout=10)
        assert client.call({"op": "step", "at": 5}, service="learner", timeout=60) is None
        status = client.call({"op": "status"}, service="learner", timeout=10)
        assert status["step"] == 5 and status["pending"] > 0
        with pytest.raises(BusError, match="'at' must be the run's step"):
            client.call({"op": "step", "at": "5"}, service="learner", timeout=10)
    finally:
        server.close()
        client.close()
        broker.stop()
        broker_thread.join(timeout=5)
    assert server.error is None


def arrived(seen: list, count: int, timeout: float = 30.0) -> list:
    """``seen`` once it holds ``count`` items (a copy), or whatever it holds at ``timeout``."""
    deadline = time.monotonic() + timeout
    while len(seen) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(seen)


def test_an_actor_that_subscribes_late_gets_the_current_weights(tmp_path: Path, fresh_tiny) -> None:
    """A learner at version 1 that published it; THEN receivers subscribe to its weights (as a
    restarted inference actor would, serving version 0): they get version 1 unasked."""
    address = f"ipc://{tmp_path}/bus.sock"
    broker = Broker(address)
    broker_thread = threading.Thread(target=broker.serve_forever, daemon=True)
    broker_thread.start()
    model, tokenizer = fresh_tiny
    served = {k: v.clone() for k, v in model.state_dict().items()}  # version 0, as loaded
    config = LearnerConfig.from_dict(
        {
            "optim": {"lr": 1e-3},
            "bucket_bytes": 1 << 20,
            "batch": {"micro_batch_tokens": 256, "max_seq_len": 64, "batch_samples": 0},
            "checkpoint": {"dir": str(tmp_path / "ckpt"), "every": 1000},
        }
    )
    learner = Learner(config, model, tokenizer)
    seen: list[tuple[int, bool]] = []  # (version, by reference) of each update's first bucket
    client = BlockingActor("client", address)
    client.actor.subscribe(
        "weights.main",
        lambda m: (
            seen.append((m.body["version"], "shm" in m.body)) if m.body["bucket"] == 0 else None
        ),
    )
    client.start()
    server = ActorThread(LearnerActor(learner, address))
    server.thread.start()
    updates: queue.Queue = queue.Queue()
    late: list[BlockingActor] = []

    def receiver(name: str, topic: str) -> BlockingActor:
        assembler = WeightAssembler(served)
        assembler.last_version = 0  # what a fresh inference actor serves

        def on_weights(msg) -> None:
            done = assembler.add(msg.body)
            if done is not None:
                updates.put((name, "shm" in msg.body, *done))

        actor = BlockingActor(name, address)
        actor.actor.subscribe(topic, on_weights)
        late.append(actor)
        return actor.start()

    try:
        episodes = [e.to_dict() for e in two_seat_episodes(3)]
        assert (
            client.call({"op": "add", "episodes": episodes}, service="learner", timeout=30)[
                "accepted"
            ]
            == 3
        )
        assert client.call({"op": "step"}, service="learner", timeout=60)["version"] == 1.0
        # At start, then after the step. The learner publishes before it replies, but the reply
        # goes peer to peer and the buckets through the broker: either may arrive first.
        assert arrived(seen, 2) == [(0, True), (1, True)]
        # An actor that hears no weights joins: nothing is sent for it (checked by the count of
        # catch-up publishes at the end).
        receiver("bystander", "metrics.")
        client.call({"op": "publish"}, service="learner", timeout=60)
        assert arrived(seen, 3) == [(0, True), (1, True), (1, True)]
        # Receivers that join after version 1 went out, on the topic and on a prefix of it.
        receiver("late", "weights.main")
        receiver("later", "weights.")
        got = {}
        while len(got) < 2:
            name, by_reference, version, state = wait_for(updates, lambda u: True, timeout=30)
            got[name] = version
            assert by_reference  # a version sent again stays in shared memory
            exported = learner.export_weights()
            assert all(torch.equal(state[k], exported[k]) for k in exported)
        assert got == {"late": 1, "later": 1}
        status = client.call({"op": "status"}, service="learner", timeout=10)
        assert status["version"] == 1 and 1 <= status["counters"]["catch_up_publishes"] <= 2
    finally:
        server.close()
        for actor in [*late, client]:
            actor.close()
        broker.stop()
        broker_thread.join(timeout=5)
    assert server.error is None


def test_weight_transport_can_be_the_bus(fresh_tiny) -> None:
    learner = Learner(LearnerConfig.from_dict({"bucket_bytes": 1 << 20}), *fresh_tiny)
    assert LearnerActor(learner, "ipc:///tmp/unused.sock").publisher.transport == "shm"
    assert (
        LearnerActor(learner, "ipc:///tmp/unused.sock", shm_weights=False).publisher.transport
        == "bus"
    )


def test_load_config_merges_yaml_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "learner.yaml"
    path.write_text("model: tiny\noptim:\n  lr: 0.001\nloss:\n  dual_clip: null\n")
    config = load_config(LearnerConfig, str(path), ["optim.warmup_steps=5", "advantage.mode=ema"])
    assert config.optim.lr == 0.001 and config.optim.warmup_steps == 5
    assert config.loss.dual_clip is None and config.advantage.mode == "ema"
    with pytest.raises(ConfigError, match="did you mean 'optim.lr'"):
        LearnerConfig.from_dict({"optim": {"lrr": 1.0}})
    with pytest.raises(ValueError):
        LearnerConfig.from_dict({"advantage": {"mode": "nope"}})


def test_arena_learner_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "arena", "learner", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "--address" in out.stdout


def test_a_policy_learner_judges_newness_by_its_own_policys_turns_only() -> None:
    """In a run of several models each learner has its own versions: the responder's learner
    at v1 must not discard an episode whose other seat the shared policy played at v3."""
    from collections import Counter
    from types import SimpleNamespace

    from synthetic import episode, turn

    turns = [turn("e", 0, "me", version=3), turn("e", 1, "other", version=1)]
    body = episode("e", turns).to_dict()
    body["seats"]["other"]["policy"] = "responder"
    counters: Counter[str] = Counter()
    learner = SimpleNamespace(
        version=1,
        state=SimpleNamespace(counters=counters),
        config=LearnerConfig.from_dict({"name": "responder", "batch": {"policy": "responder"}}),
    )
    actor = LearnerActor.__new__(LearnerActor)
    actor.learner = learner
    assert actor._admit(body)  # its own seat's turn is v1: not newer
    learner.config = LearnerConfig()  # the run's only learner: every seat's turn counts
    assert not actor._admit(body)
    assert counters["discarded_newer_version"] == 1
