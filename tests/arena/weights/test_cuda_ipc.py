"""Same-GPU weight sync (arena/weights/cuda_ipc.py): when it is chosen, what a receiver that
cannot open an offer answers, and (on a host with CUDA) an update taken by another process
through an IPC handle, device to device.

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_cuda_ipc.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import msgpack
import pytest
import torch

from arena.weights.buckets import WeightUpdateError
from arena.weights.cuda_ipc import (
    NEEDS_BYTES,
    IpcImporter,
    _opened_key,
    can_open,
    choose,
    device_id,
)
from arena.weights.publisher import WeightPublisher
from arena.weights.receiver import WeightReceiver

GPU0, GPU1, ELSEWHERE = "boot-a/GPU-0", "boot-a/GPU-1", "boot-b/GPU-0"


@pytest.mark.parametrize(
    ("publisher", "receivers", "shm", "transport"),
    [
        (GPU0, [GPU0], True, "cuda_ipc"),
        (GPU0, [GPU0, GPU0], False, "cuda_ipc"),
        (GPU0, [GPU0, GPU1], True, "shm"),  # one receiver on another GPU: bytes for all
        (GPU0, [ELSEWHERE], True, "shm"),  # the same GPU model number on another host
        (GPU0, [None], False, "bus"),  # a CPU receiver
        (GPU0, [], True, "shm"),  # no receiver heard from yet
        (None, [None], True, "shm"),  # a CPU learner
        (None, [], False, "bus"),
    ],
)
def test_the_transport_is_cuda_ipc_only_when_every_receiver_shares_the_gpu(
    publisher: str | None, receivers: list[str | None], shm: bool, transport: str
) -> None:
    assert choose(publisher, receivers, shm) == transport


def test_who_can_open_an_offer() -> None:
    assert can_open({"device": GPU0}, GPU0)
    assert not can_open({"device": GPU0}, GPU1)
    assert not can_open({"device": GPU0}, None)
    assert not can_open({}, GPU0)
    assert device_id("cpu") is None and device_id(None) is None


def receiver(device: str | None, state: dict[str, torch.Tensor]) -> tuple[WeightReceiver, list]:
    events: list[tuple[Any, ...]] = []
    policy = SimpleNamespace(
        version=0, state_dict=lambda: state, separable_weights=lambda: frozenset()
    )
    out = WeightReceiver(
        SimpleNamespace(name="inference-test"),  # only its name is read on this path
        "main",
        policy,
        deliver=lambda v, s, t: events.append(("deliver", v, s, t)),
        refuse=lambda v, r, t: events.append(("refuse", v, r, t)),
        device=device,
    )
    return out, events


def test_an_offer_for_another_device_is_refused_asking_for_bytes() -> None:
    take, events = receiver(None, {"w": torch.zeros(3)})
    body = {"version": 1, "bucket": 0, "num_buckets": 1, "checksum": 0, "tensors": []}
    take.on_weights(SimpleNamespace(body=body | {"cuda_ipc": {"device": GPU0}}, src="learner"))
    assert events == [("refuse", 1, f"inference-test on None {NEEDS_BYTES}", "cuda_ipc")]
    # a stale offer is refused as stale, not as one to fetch again as bytes
    take._assembler.last_version = 5  # type: ignore[union-attr]
    take.on_weights(SimpleNamespace(body=body | {"cuda_ipc": {"device": GPU0}}, src="learner"))
    assert events[1][0] == "refuse" and "not newer" in events[1][2]


def test_an_opened_offer_is_read_and_checked_like_any_update() -> None:
    """The importer's reading past the CUDA calls, on a CPU buffer standing in for the opened
    handle: each tensor at its offset, cast to the served dtype; a wrong shape, an unknown name
    or a tensor past the buffer's end is refused. One that cannot be opened is refused too."""
    importer = IpcImporter()
    data = torch.zeros(512, dtype=torch.uint8)
    data[:24].view(torch.float32).copy_(torch.arange(6.0))
    data[256:264].view(torch.float32).copy_(torch.tensor([7.0, 8.0]))
    importer._opened[(b"handle", 0, 512)] = data
    expected = {"w": torch.zeros(2, 3, dtype=torch.bfloat16), "b": torch.zeros(2)}
    entries = [
        {"name": "w", "dtype": "float32", "shape": [2, 3], "offset": 0},
        {"name": "b", "dtype": "float32", "shape": [2], "offset": 256},
    ]
    offer = {"handle": [0, b"handle", 512, 0], "tensors": entries}
    state = importer.take(offer, expected)
    assert state["w"].dtype == torch.bfloat16 and state["w"].flatten().tolist() == list(range(6))
    assert state["b"].tolist() == [7.0, 8.0]
    for bad, error in (
        ({"shape": [3, 2]}, "w: got float32\\[3, 2\\], model has bfloat16\\[2, 3\\]"),
        ({"name": "x"}, "unknown tensor 'x'"),
        ({"offset": 500}, "w lies outside the offered buffer"),
    ):
        with pytest.raises(WeightUpdateError, match=error):
            importer.take(offer | {"tensors": [entries[0] | bad]}, expected)
    with pytest.raises(WeightUpdateError, match="a CUDA IPC offer that cannot be opened"):
        importer.take({"handle": [0, b"other", 0, 0, b"", 0, b"", False], "tensors": []}, expected)


def test_two_buffers_in_one_allocation_are_opened_apart() -> None:
    """The caching allocator can carve both staging buffers out of one segment: their offers
    share the IPC handle and differ in offset. Each must read its own buffer (here CPU buffers
    standing in for the opened ones), not the one opened first: that is the older version."""
    importer = IpcImporter()
    handle = [0, b"segment", 256, 0, b"", 0, b"", False]
    for offset, value in ((0, 1.0), (1024, 2.0)):
        data = torch.zeros(256, dtype=torch.uint8)
        data[:8].view(torch.float32).fill_(value)
        importer._opened[_opened_key(handle[:3] + [offset] + handle[4:])] = data
    expected = {"b": torch.zeros(2)}
    entries = [{"name": "b", "dtype": "float32", "shape": [2], "offset": 0}]
    for offset, value in ((1024, 2.0), (0, 1.0)):
        offer = {"handle": handle[:3] + [offset] + handle[4:], "tensors": entries}
        assert importer.take(offer, expected)["b"].tolist() == [value, value]


def test_a_cpu_publisher_sends_bytes_whatever_its_receivers_report(shm_dir) -> None:
    publisher = WeightPublisher("main", directory=shm_dir)
    publisher.note_receiver("inference-1", device_id("cpu"))
    assert not publisher.on_device("cpu")
    sent: list[dict[str, Any]] = []
    publisher.publish({"w": torch.ones(3)}, 1, sent.append)
    publisher.close()
    assert len(sent) == 1 and "shm" in sent[0] and "cuda_ipc" not in sent[0]


CHILD = """
import json, sys, types
import msgpack, torch
from arena.weights.receiver import WeightReceiver
body = msgpack.unpackb(sys.stdin.buffer.read())
expected = {"w": torch.zeros(4, 5, device="cuda"), "b": torch.zeros(7, device="cuda")}
events = []
policy = types.SimpleNamespace(version=0, state_dict=lambda: expected,
                               separable_weights=lambda: frozenset())
take = WeightReceiver(types.SimpleNamespace(name="child"), "main", policy,
                      deliver=lambda v, s, t: events.append([v, t, {k: x.tolist() for k, x in s.items()}]),
                      refuse=lambda v, r, t: events.append([v, t, r]),
                      device=body["cuda_ipc"]["device"])
take.on_weights(types.SimpleNamespace(body=body, src="learner"))
print(json.dumps(events))
"""
"""Another process on the same GPU: takes a body off the wire (msgpack) and reports."""


def test_a_same_gpu_update_goes_by_ipc_and_arrives_whole(device: str, shm_dir) -> None:
    """``[cpu]``: the publisher falls back to shared memory. ``[cuda]``: another process takes
    the update, as msgpack carries it, by CUDA IPC, device to device."""
    state = {"w": torch.arange(20.0).view(4, 5).to(device), "b": torch.full((7,), 3.0).to(device)}
    publisher = WeightPublisher("main", directory=shm_dir)
    publisher.note_receiver("inference-1", device_id(device))
    sent: list[dict[str, Any]] = []
    publisher.publish(state, 1, sent.append)
    if device == "cpu":
        publisher.close()
        assert [("shm" in b, "cuda_ipc" in b) for b in sent] == [(True, False)]
        return
    assert len(sent) == 1 and sent[0]["tensors"] == []
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=msgpack.packb(sent[0]),
        capture_output=True,
        timeout=120,
        check=True,
    )
    publisher.close()  # the staging buffer lives as long as the publisher's exporter
    ((version, transport, got),) = json.loads(child.stdout)
    assert (version, transport) == (1, "cuda_ipc")
    assert got == {name: t.cpu().tolist() for name, t in state.items()}
