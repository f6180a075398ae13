"""The inference actor in a real process behind a real broker, over ipc:// sockets.

Serves the tiny model. Covers batching across requester processes, logprobs against teacher
forcing, weight updates (applied, and refused when partial or corrupt) by bytes on the bus, by a
same-host shared-memory file and by fetching the bytes, checkpoint loads, pause/resume, the busy
limit, malformed requests, and a dead actor turning into an error instead of a hang.

Run with ``.venv/bin/python -m pytest -q tests/arena/actors/test_inference.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from arena.actors.inference import InferenceActor
from arena.bus import Actor, BlockingActor, BusError
from arena.models import load_model, tiny_config, tiny_model
from arena.policies.base import Policy
from arena.policies.config import InferenceConfig
from arena.policies.remote import RemotePolicy
from arena.policies.types import ContextOverflow, Generation, SamplingParams
from arena.weights.buckets import make_buckets
from arena.weights.publisher import WeightPublisher
from tests.arena.bus.conftest import spawn, spawn_broker, stop, wait_for_service
from tests.cli import arena_process

LOGPROB_ATOL = 1e-4  # fp32 served vs teacher forced: see tests/arena/policies/test_hf.py
GREEDY = {"temperature": 0.0, "max_new_tokens": 6}
CHAT = {"messages": [{"role": "user", "content": "Your move?"}]}

REQUESTER = r"""
import json, sys, time
import numpy as np
from arena.bus import BlockingActor
address, tag, count, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with BlockingActor("requester-" + tag, address) as actor:
    time.sleep(max(0.0, start_at - time.time()))
    futures = [actor.request({"prompt": {"ids": np.array([1, 9690, 198, i], np.int32)},
                              "params": {"max_new_tokens": 4}}, service="policy:main", timeout=60)
               for i in range(count)]
    print(json.dumps([len(f.result().body["token_ids"]) for f in futures]), flush=True)
"""


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="arena-", dir="/tmp")
    address = f"ipc://{folder}/b.sock"
    proc = spawn_broker(address, "--heartbeat-timeout", "2.0")
    yield address
    stop(proc)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def start_inference(broker: str) -> Iterator[Callable[..., Any]]:
    procs = []
    logs = tempfile.mkdtemp(prefix="arena-inference-")

    def start(name: str, *flags: str) -> Any:
        proc = arena_process(
            "inference",
            "--address",
            broker,
            "--model",
            "tiny",
            "--name",
            name,
            "--heartbeat-interval",
            "0.2",
            "--dtype",
            "float32",  # exact comparisons: not `auto`, which is bf16 on some CPUs
            *flags,
            log=Path(logs) / f"{name}.log",
        )
        procs.append(proc)
        wait_for_service(broker, f"policy:{name}", timeout=120)
        return proc

    yield start
    for proc in procs:
        stop(proc)
    shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture(scope="module")
def main_actor(start_inference: Callable[..., Any]) -> Any:
    return start_inference("main", "--max-batch", "16", "--max-wait-ms", "500")


@pytest.fixture
def client(broker: str) -> Iterator[BlockingActor]:
    with BlockingActor(f"client-{time.monotonic_ns()}", broker) as actor:
        yield actor


def status(client: BlockingActor, name: str) -> dict[str, Any]:
    return client.call(service=f"policy:{name}:status", timeout=10)


def ask(
    client: BlockingActor, name: str, prompt: dict[str, Any] = CHAT, params: dict[str, Any] = GREEDY
) -> Generation:
    return Generation.from_dict(
        client.call({"prompt": prompt, "params": params}, service=f"policy:{name}", timeout=60)
    )


def test_requests_from_several_processes_share_batches(
    broker: str, main_actor: Any, client: BlockingActor
) -> None:
    before = len(status(client, "main")["batch_sizes"])
    start_at = time.time() + 4.0  # every requester is connected and waiting by then
    requesters = [spawn("-c", REQUESTER, broker, f"r{i}", "4", str(start_at)) for i in range(3)]
    outputs = [
        json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in requesters
    ]
    assert outputs == [[4, 4, 4, 4]] * 3
    sizes = status(client, "main")["batch_sizes"][before:]
    assert sum(sizes) == 12
    assert max(sizes) > 4, f"no batch mixed requests from two processes: {sizes}"
    print("observed batch sizes", sizes)


def teacher_forced(model: torch.nn.Module, gen: Generation) -> np.ndarray:
    ids = torch.from_numpy(gen.conversation_ids.astype(np.int64))[None]
    with torch.no_grad():
        logprobs = model(ids).logits.log_softmax(-1)[0, len(gen.prompt_ids) - 1 : -1]
    return logprobs.gather(1, ids[0, len(gen.prompt_ids) :, None]).squeeze(1).numpy()


class Learner:
    """A test-side publisher: a bus actor that sees ``weights_ack.<name>`` and, when given
    publishers, serves their byte fetches."""

    def __init__(self, broker: str, name: str, *publishers: WeightPublisher) -> None:
        self.name = name
        self.acks: queue.Queue[dict[str, Any]] = queue.Queue()
        self.actor = BlockingActor(f"learner-{name}-{time.monotonic_ns()}", broker)
        self.actor.actor.subscribe(f"weights_ack.{name}", lambda m: self.acks.put(m.body))
        for publisher in publishers:
            publisher.attach(self.actor.actor)

    def publish(
        self,
        publisher: WeightPublisher,
        state: dict[str, torch.Tensor],
        version: int,
        before_send: Callable[[dict[str, Any]], None] = lambda body: None,
    ) -> None:
        def send(body: dict[str, Any]) -> None:
            before_send(body)
            self.actor.publish(publisher.topic, body, mtype="weights")

        publisher.publish(state, version, send)

    def ack(self, version: int) -> dict[str, Any]:
        """The next ack for ``version`` (acks of other versions are skipped)."""
        while (ack := self.acks.get(timeout=60))["version"] != version:
            pass
        return ack

    def __enter__(self) -> Learner:
        self.actor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.actor.close()


def noisy(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    noise = torch.Generator().manual_seed(seed)
    return {k: v + 0.5 * torch.randn(v.shape, generator=noise) for k, v in state.items()}


def test_served_logprobs_match_teacher_forcing(main_actor: Any, client: BlockingActor) -> None:
    model, _ = tiny_model(seed=0)  # the served weights: same seed, same model
    gen = ask(client, "main", params={"max_new_tokens": 8, "seed": 3})
    np.testing.assert_allclose(gen.logprobs, teacher_forced(model, gen), atol=LOGPROB_ATOL)
    assert gen.version == 0 and gen.prompt_ids.dtype == np.int32


@pytest.mark.parametrize(
    ("body", "code", "match"),
    [
        ("hello", "bad_request", "must be a map"),
        ({"params": {}}, "bad_request", "lacks 'prompt'"),
        ({"promt": CHAT}, "bad_request", "did you mean 'prompt'"),
        ({"prompt": CHAT, "params": {"temperature": -1}}, "bad_request", "temperature"),
        (
            {"prompt": CHAT, "params": {"max_tokens": 5}},
            "bad_request",
            "did you mean 'max_new_tokens'",
        ),
        ({"prompt": {"ids": np.array([0.5])}}, "bad_request", "1-D array of ints"),
        ({"prompt": {"messages": "hi"}}, "bad_request", "must be a list"),
        ({"prompt": {"ids": np.ones(4096, np.int32)}}, "context_overflow", "leaves no room"),
    ],
)
def test_malformed_requests_get_clear_errors(
    main_actor: Any, client: BlockingActor, body: Any, code: str, match: str
) -> None:
    with pytest.raises(BusError, match=match) as info:
        client.call(body, service="policy:main", timeout=10)
    assert info.value.code == code
    assert ask(client, "main").finish_reason in ("stop", "length")  # still serving


def test_remote_policy_has_the_policy_interface(broker: str, main_actor: Any) -> None:
    with RemotePolicy.connect(broker, "main") as policy:
        a, b = policy.generate([CHAT["messages"], [1, 2, 3]])
        assert len(a.token_ids) == len(a.logprobs) > 0 and b.prompt_ids.tolist() == [1, 2, 3]
        assert policy.version == 0
        # too long for the context: the ContextOverflow a local policy raises (an episode ends
        # with termination context_overflow), not a BusError that fails the episode
        with pytest.raises(ContextOverflow, match="prompt of 4096 tokens leaves no room"):
            policy.generate([np.ones(4096, np.int32)])


def test_remote_policy_from_asyncio_code(broker: str, main_actor: Any) -> None:
    async def rollout() -> list[Generation]:
        actor = Actor(f"rollout-{time.monotonic_ns()}", broker)
        await actor.start()
        try:
            policy = RemotePolicy(actor, "main")
            with pytest.raises(ContextOverflow, match="exceed the .*-token context"):
                await policy.ascore([[1, 2, 3]], [[np.ones(4096, np.int32)]])
            return await policy.agenerate([CHAT["messages"]] * 3, SamplingParams(max_new_tokens=3))
        finally:
            await actor.close()

    generations = asyncio.run(rollout())
    assert len(generations) == 3 and all(0 < len(g.token_ids) <= 3 for g in generations)


def test_scoring_requests_batch_with_generations_under_one_version(
    broker: str, main_actor: Any, client: BlockingActor
) -> None:
    """A scoring request returns each continuation's token logprobs after the prompt (what
    teacher forcing on the same tiny model gives), from the same batches and version as the
    generations beside it; a continuation that does not fit is refused, not truncated."""
    from arena.policies.scoring import continuation_logprobs
    from arena.policies.types import Scoring

    prompt = np.array([1, 9690, 198, 2683, 30, 2, 198], np.int32)
    replies = [np.array([339, 2], np.int32), np.array([1136], np.int32)]
    model, _ = tiny_model()
    (expected,) = continuation_logprobs(model, [(prompt, replies)])

    async def mixed() -> tuple[list[Scoring], list[Generation]]:
        actor = Actor(f"chooser-{time.monotonic_ns()}", broker)
        await actor.start()
        try:
            policy = RemotePolicy(actor, "main")
            return await asyncio.gather(
                policy.ascore([prompt] * 3, [replies] * 3),
                policy.agenerate([CHAT["messages"]] * 3, SamplingParams(max_new_tokens=3)),
            )
        finally:
            await actor.close()

    before = status(client, "main")["counters"]
    scorings, generations = asyncio.run(mixed())
    after = status(client, "main")["counters"]
    assert after.get("scorings", 0) - before.get("scorings", 0) == 3
    for scoring in scorings:
        assert scoring.prompt_ids.tolist() == prompt.tolist()
        for got, want in zip(scoring.logprobs, expected, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-4)
    assert {s.version for s in scorings} == {g.version for g in generations} == {0}
    body = {"prompt": {"ids": prompt}, "continuations": [np.ones(4096, np.int32)]}
    with pytest.raises(BusError, match="exceed the .*-token context") as info:
        client.call(body, service="policy:main", timeout=10)
    assert info.value.code == "context_overflow"
    for bad, match in (([], "non-empty list"), ([np.zeros(0, np.int32)], "is empty")):
        with pytest.raises(BusError, match=match):
            client.call({"prompt": {"ids": prompt}, "continuations": bad}, service="policy:main")


def test_weight_updates_apply_and_corrupt_ones_are_refused(
    start_inference: Callable[..., Any], broker: str, client: BlockingActor
) -> None:
    start_inference("w")
    acks: queue.Queue[dict[str, Any]] = queue.Queue()
    learner = BlockingActor(f"learner-{time.monotonic_ns()}", broker)
    learner.actor.subscribe("weights_ack.w", lambda m: acks.put(m.body))
    model, _ = tiny_model(seed=0)
    noise = torch.Generator().manual_seed(1)
    state = {
        k: v + 0.5 * torch.randn(v.shape, generator=noise) for k, v in model.state_dict().items()
    }

    def publish(buckets: list[dict[str, Any]]) -> None:
        for bucket in buckets:
            learner.publish("weights.w", bucket, mtype="weights")

    def buckets(version: int, tensors: dict[str, torch.Tensor] = state) -> list[dict[str, Any]]:
        return list(make_buckets(tensors, version=version, bucket_bytes=1 << 20))

    with learner:
        original = ask(client, "w")
        publish(buckets(1))
        ack = acks.get(timeout=60)
        assert (ack["version"], ack["applied"], ack["serving"]) == (1, True, 1)
        updated = ask(client, "w")
        assert updated.version == 1 and updated.token_ids.tolist() != original.token_ids.tolist()

        wrong_shape = buckets(2)
        wrong_shape[-1]["tensors"][0]["shape"] = [1, *wrong_shape[-1]["tensors"][0]["shape"]]
        # Floats are cast to the served dtype; an integer tensor for a float one is refused.
        wrong_dtype = buckets(3, {**state, "model.norm.weight": state["model.norm.weight"].int()})
        flipped = buckets(4)
        data = flipped[1]["tensors"][0]["data"].copy()
        data[0] ^= 0xFF
        flipped[1]["tensors"][0]["data"] = data
        for version, corrupt, reason in [
            (2, wrong_shape, "got float32"),
            (3, wrong_dtype, "got int32"),
            (4, flipped, "checksum mismatch"),
        ]:
            publish(corrupt)
            ack = acks.get(timeout=60)
            assert (ack["version"], ack["applied"], ack["serving"]) == (version, False, 1)
            assert reason in ack["reason"]
        publish(buckets(5)[:-1])  # a missing bucket: never applied, dropped when version 6 starts
        time.sleep(0.5)
        still = ask(client, "w")
        assert still.version == 1 and still.token_ids.tolist() == updated.token_ids.tolist()

        publish(buckets(6, model.state_dict()))  # the original weights again
        while (ack := acks.get(timeout=60))["version"] != 6:
            assert not ack["applied"]  # leftovers of the corrupt updates, refused
        assert ack["applied"] and ack["serving"] == 6
        restored = ask(client, "w")
        assert restored.version == 6 and restored.token_ids.tolist() == original.token_ids.tolist()
        info = status(client, "w")
        assert info["version"] == 6 and info["weights"]["applied"] == 2
        assert info["weights"]["rejected"] >= 4


def test_same_host_updates_map_shared_memory_and_match_the_bus(
    start_inference: Callable[..., Any], broker: str, client: BlockingActor
) -> None:
    start_inference("s")
    original_state = tiny_model(seed=0)[0].state_dict()
    state = noisy(original_state, seed=1)
    shm, bus = (
        WeightPublisher("s", bucket_bytes=1 << 20),
        WeightPublisher("s", shm=False, bucket_bytes=1 << 20),
    )
    assert shm.transport == "shm"
    with Learner(broker, "s", shm) as learner:
        original = ask(client, "s")
        learner.publish(shm, state, 1)
        ack = learner.ack(1)
        assert (ack["applied"], ack["transport"], ack["serving"]) == (True, "shm", 1)
        via_shm = ask(client, "s")
        assert via_shm.version == 1 and via_shm.token_ids.tolist() != original.token_ids.tolist()
        learner.publish(bus, original_state, 2)
        assert learner.ack(2)["transport"] == "bus"
        assert ask(client, "s").token_ids.tolist() == original.token_ids.tolist()
        learner.publish(bus, state, 3)  # the same weights by the bus: the same replies
        assert learner.ack(3)["applied"]
        assert ask(client, "s").token_ids.tolist() == via_shm.token_ids.tolist()

        def tamper(body: dict[str, Any]) -> None:  # flip a byte of bucket 1 in the file
            if body["bucket"] == 1:
                with open(body["shm"]["path"], "r+b") as f:
                    f.seek(body["tensors"][0]["offset"])
                    byte = f.read(1)[0]
                    f.seek(body["tensors"][0]["offset"])
                    f.write(bytes([byte ^ 0xFF]))

        learner.publish(shm, original_state, 4, before_send=tamper)
        ack = learner.ack(4)
        assert (ack["applied"], ack["serving"]) == (False, 3) and "checksum mismatch" in ack[
            "reason"
        ]
        assert ask(client, "s").token_ids.tolist() == via_shm.token_ids.tolist()
        learner.publish(shm, original_state, 5)
        assert learner.ack(5)["applied"]
        assert ask(client, "s").token_ids.tolist() == original.token_ids.tolist()
    shm.close()


def test_a_receiver_that_cannot_map_fetches_the_bytes(
    start_inference: Callable[..., Any], broker: str, client: BlockingActor
) -> None:
    start_inference("f", "--no-shm-weights")  # as if on another host
    state = noisy(tiny_model(seed=0)[0].state_dict(), seed=2)
    publisher = WeightPublisher("f", bucket_bytes=1 << 20)
    with Learner(broker, "f", publisher) as learner:
        before = ask(client, "f")
        learner.publish(publisher, state, 1)
        ack = learner.ack(1)
        assert (ack["applied"], ack["transport"], ack["serving"]) == (True, "fetch", 1)
        assert ask(client, "f").token_ids.tolist() != before.token_ids.tolist()
        assert status(client, "f")["weights"]["fetched"] >= 3
        served = learner.actor.actor.counters  # the bytes came peer to peer, not via the broker
        assert served["served_direct"] >= 3 and served["served_brokered"] == 0
    unserved = WeightPublisher("f", bucket_bytes=1 << 20)
    with Learner(broker, "f") as learner:  # a publisher that answers no fetches
        learner.publish(unserved, state, 2)
        ack = learner.ack(2)
        assert (ack["applied"], ack["serving"]) == (False, 1) and "could not fetch" in ack["reason"]
    publisher.close()
    unserved.close()


def test_load_serves_a_checkpoint_and_refuses_bad_ones(
    start_inference: Callable[..., Any], broker: str, client: BlockingActor, tmp_path: Any
) -> None:
    start_inference("l", "--actor-name", "inference-l")
    checkpoint, model = tmp_path / "seed1", tiny_model(seed=1)[0]
    model.save_pretrained(checkpoint)
    original_dir = tmp_path / "seed0"
    tiny_model(seed=0)[0].save_pretrained(original_dir)
    config = tiny_config()
    config.hidden_size = 32
    type(model)(config).save_pretrained(tmp_path / "narrow")
    with Learner(broker, "l") as learner:
        original = ask(client, "l")
        learner.actor.send(
            "control", {"command": "load", "path": str(checkpoint), "version": 7}, dst="inference-l"
        )
        ack = learner.ack(7)
        assert (ack["applied"], ack["transport"], ack["serving"]) == (True, "load", 7)
        loaded = ask(client, "l", params={"max_new_tokens": 8, "seed": 3})
        assert loaded.version == 7
        np.testing.assert_allclose(
            loaded.logprobs, teacher_forced(model, loaded), atol=LOGPROB_ATOL
        )
        for version, path, reason in [
            (8, tmp_path / "missing", "no directory"),
            (9, tmp_path / "narrow", "model has float32"),
            (10, None, "needs a 'path'"),
        ]:
            body = {"command": "load", "version": version, **({"path": str(path)} if path else {})}
            learner.actor.publish("control.policy.l", body)  # the topic works as well
            ack = learner.ack(version)
            assert (ack["applied"], ack["serving"]) == (False, 7) and reason in ack["reason"], ack
        learner.actor.publish("control.policy.l", {"command": "load", "path": str(original_dir)})
        assert "integer 'version'" in learner.ack(-1)["reason"]
        # Population play goes back in time: an older version is served as asked.
        learner.actor.publish(
            "control.policy.l", {"command": "load", "path": str(original_dir), "version": 2}
        )
        assert learner.ack(2)["applied"]
        back = ask(client, "l")
        assert back.version == 2 and back.token_ids.tolist() == original.token_ids.tolist()
        # ... and to its initial model, by the spec: found in this host's cache, not the sender's
        learner.actor.publish("control.policy.l", {"command": "load", "path": "tiny", "version": 0})
        assert learner.ack(0)["applied"]
        initial = ask(client, "l")
        assert initial.version == 0 and initial.token_ids.tolist() == original.token_ids.tolist()


@pytest.mark.slow
def test_the_135m_model_takes_shared_memory_and_bus_updates_alike(
    start_inference: Callable[..., Any], broker: str, client: BlockingActor
) -> None:
    start_inference("big", "--model", "smollm2-135m")  # the last --model wins
    state = noisy(load_model("smollm2-135m")[0].state_dict(), seed=3)
    shm, bus = WeightPublisher("big"), WeightPublisher("big", shm=False)
    with Learner(broker, "big", shm) as learner:
        learner.publish(shm, state, 1)
        assert learner.ack(1)["transport"] == "shm"
        via_shm = ask(client, "big", params={"temperature": 0.0, "max_new_tokens": 12})
        learner.publish(bus, state, 2)
        assert learner.ack(2)["transport"] == "bus"
        via_bus = ask(client, "big", params={"temperature": 0.0, "max_new_tokens": 12})
    assert via_shm.token_ids.tolist() == via_bus.token_ids.tolist()
    np.testing.assert_array_equal(via_shm.logprobs, via_bus.logprobs)
    shm.close()


def test_pause_resume_and_busy(start_inference: Callable[..., Any], client: BlockingActor) -> None:
    start_inference("b", "--max-batch", "1", "--max-queue", "2")
    client.publish("control.policy.b", {"command": "pause"})
    deadline = time.monotonic() + 10
    while not status(client, "b")["paused"] and time.monotonic() < deadline:
        time.sleep(0.05)
    waiting = [
        client.request({"prompt": CHAT, "params": GREEDY}, service="policy:b", timeout=60)
        for _ in range(2)
    ]
    time.sleep(0.5)
    with pytest.raises(BusError, match="retry later") as info:
        client.call({"prompt": CHAT, "params": GREEDY}, service="policy:b", timeout=10)
    assert info.value.code == "busy"
    assert not any(f.done() for f in waiting) and status(client, "b")["queued"] == 2
    client.publish("control.policy.b", {"command": "resume"})
    results = [Generation.from_dict(f.result(60).body) for f in waiting]
    assert results[0].token_ids.tolist() == results[1].token_ids.tolist()
    info = status(client, "b")
    assert info["batch_sizes"][-2:] == [1, 1] and info["counters"]["busy"] == 1


def test_a_dead_actor_fails_requests_instead_of_hanging(
    start_inference: Callable[..., Any], client: BlockingActor
) -> None:
    proc = start_inference("d")
    client.publish("control.policy.d", {"command": "pause"})
    time.sleep(0.3)
    pending = client.request({"prompt": CHAT, "params": GREEDY}, service="policy:d", timeout=60)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(BusError) as info:
        pending.result(30)
    assert info.value.code == "actor_dead" and time.monotonic() - start < 15
    # The next request fails clearly too: through the broker, which either still routes to
    # the dead actor until its heartbeat timeout (actor_dead) or has dropped it.
    with pytest.raises(BusError) as info:
        client.call({"prompt": CHAT}, service="policy:d", timeout=30)
    assert info.value.code in ("actor_dead", "unknown_service")
    deadline = time.monotonic() + 30
    while any("policy:d" in a["services"] for a in client.call(service="broker.actors")):
        assert time.monotonic() < deadline, "the broker never dropped the dead actor"
        time.sleep(0.1)
    with pytest.raises(BusError) as info:
        client.call({"prompt": CHAT}, service="policy:d", timeout=10)
    assert info.value.code == "unknown_service"


def test_a_republish_of_the_served_version_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Every learner publishes its weights when it starts (a restarted one rolls the actors back
    that way); on a fresh run that is the version 0 each actor loaded, refused as not newer.
    That refusal is logged at INFO; any other refusal stays a WARNING."""
    acks: list[tuple[int, bool]] = []
    actor = SimpleNamespace(
        counters=Counter(),
        policy=SimpleNamespace(version=0),
        actor=SimpleNamespace(name="inference-0"),
        _ack=lambda version, applied, reason, transport: acks.append((version, applied)),
    )
    with caplog.at_level(logging.INFO, logger="arena.actors.inference"):
        InferenceActor._refuse(actor, 0, "version 0 is not newer than 0", "shm")
        InferenceActor._refuse(actor, 3, "update 3 lacks 2 tensors, e.g. lm_head", "bus")
    assert [r.levelname for r in caplog.records] == ["INFO", "WARNING"]
    assert acks == [(0, False), (3, False)] and actor.counters["weights_rejected"] == 2


class StuckPolicy(Policy):
    """A backend whose engine never returns from a batch until ``release`` is set."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def generate(self, prompts: Any, params: Any = None) -> list[Generation]:
        self.release.wait()
        raise RuntimeError("released")


def test_a_wedged_backend_does_not_hold_the_actor_open(broker: str) -> None:
    """A batch stuck in the backend: closing the actor waits ``close_grace`` for it, then goes
    without it and reports it (``wedged``, which makes ``arena inference`` leave at once with
    ``exit_now``: Python's exit would join the stuck thread forever)."""
    release = threading.Event()

    async def scenario() -> tuple[bool, float, bool]:
        config = InferenceConfig(name="stuck", max_wait_ms=1.0)
        actor = InferenceActor(StuckPolicy(release), broker, config, close_grace=0.5)
        await actor.start()
        client = Actor(f"stuck-client-{time.monotonic_ns()}", broker)
        await client.start()
        pending = client.request({"prompt": CHAT}, service="policy:stuck", timeout=30)
        deadline = time.monotonic() + 10
        while actor.backend.since is None:
            assert time.monotonic() < deadline, "the request never reached the backend"
            await asyncio.sleep(0.01)
        start = time.monotonic()
        await actor.close()
        closing = time.monotonic() - start
        wedged = actor.wedged
        pending.cancel()
        await client.close()
        return wedged, closing, actor.backend.since is not None

    try:
        wedged, closing, busy = asyncio.run(scenario())
    finally:
        release.set()
    assert wedged and busy
    assert 0.5 <= closing < 3.0


def test_closing_fails_the_batch_in_flight_and_the_queued_requests_clearly(broker: str) -> None:
    """Stopping owes every request taken an answer: the one in the batch being generated and
    the one queued behind it both get ``shutting_down`` at once (not a timeout, not
    ``actor_dead``), though the backend call has not returned."""
    release = threading.Event()

    async def scenario() -> tuple[list[str], float]:
        config = InferenceConfig(name="closing", max_wait_ms=1.0, max_batch=1)
        actor = InferenceActor(StuckPolicy(release), broker, config, close_grace=0.2)
        await actor.start()
        client = Actor(f"closing-client-{time.monotonic_ns()}", broker)
        await client.start()
        body = {"prompt": CHAT}
        in_flight = client.request(body, service="policy:closing", timeout=30)
        while actor.backend.since is None:
            await asyncio.sleep(0.01)
        queued = client.request(body, service="policy:closing", timeout=30)
        while not len(actor.queue):
            await asyncio.sleep(0.01)
        start = time.monotonic()
        await actor.close()
        codes = []
        for pending in (in_flight, queued):
            try:
                await asyncio.wait_for(pending, 5)
                codes.append("reply")
            except BusError as err:
                codes.append(err.code)
        took = time.monotonic() - start
        await client.close()
        return codes, took

    try:
        codes, took = asyncio.run(scenario())
    finally:
        release.set()
    assert codes == ["shutting_down", "shutting_down"]
    assert took < 3.0  # close_grace (0.2 s) for the stuck call, not a request timeout


def test_a_call_stuck_past_the_hang_timeout_withholds_heartbeats(broker: str) -> None:
    """A batch stuck longer than ``hang_timeout`` (0.5 s here): the actor stops sending
    heartbeats and does not register again, so the broker (``--heartbeat-timeout 2``) declares
    it dead as it would a stopped process (``arena train`` then kills it: arena/run/hangs.py).
    Until the hang timeout the stuck call is only slow, and the heartbeats go on."""
    release = threading.Event()

    async def scenario() -> tuple[float, int]:
        config = InferenceConfig(name="wedged", max_wait_ms=1.0, hang_timeout=0.5)
        actor = InferenceActor(StuckPolicy(release), broker, config, close_grace=0.1)
        await actor.start()
        client = Actor(f"wedged-client-{time.monotonic_ns()}", broker)
        await client.start()
        pending = client.request({"prompt": CHAT}, service="policy:wedged", timeout=30)
        while actor.backend.since is None:
            await asyncio.sleep(0.01)
        start = time.monotonic()
        while True:
            listed = await client.request(service="broker.actors", timeout=5)
            if not any(a["name"] == actor.actor.name for a in listed.body):
                break
            assert time.monotonic() - start < 15, "the broker never declared the actor dead"
            await asyncio.sleep(0.1)
        took = time.monotonic() - start
        withheld = actor.actor.counters["heartbeats_withheld"]
        pending.cancel()
        await client.close()
        await actor.close()
        return took, withheld

    try:
        took, withheld = asyncio.run(scenario())
    finally:
        release.set()
    # 0.5 s of hang timeout, then the broker's 2 s of silence and its next sweep
    assert 2.0 <= took < 6.0, took
    assert withheld >= 1
