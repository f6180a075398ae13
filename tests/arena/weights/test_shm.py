"""Same-host weight transport: the shared-memory file, reference buckets and their checks.

In one process, with the tiny model: the file is valid safetensors, references assemble into the
exact state, a tampered or foreign file is refused, buckets are announced only once written,
orphans are swept, a version sent again keeps to shared memory, and a failed write falls back
to byte buckets for the same version.

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_shm.py``.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from arena.models import tiny_model
from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import StaleBucket, WeightUpdateError, make_buckets, plan_buckets
from arena.weights.publisher import WeightPublisher
from arena.weights.shm import (
    SharedMemoryReader,
    SharedMemoryWriter,
    duplicate_names,
    host_id,
    map_readonly,
)


@pytest.fixture(scope="module")
def state() -> dict[str, torch.Tensor]:
    model, _ = tiny_model(seed=0)
    return model.state_dict()  # lm_head.weight is tied to model.embed_tokens.weight


def noisy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v + 1.0 for k, v in state.items()}


def published(
    publisher: WeightPublisher, state: dict[str, torch.Tensor], version: int
) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    publisher.publish(state, version, bodies.append)
    return bodies


def assemble(
    assembler: WeightAssembler, bodies: list[dict[str, Any]]
) -> tuple[int, dict[str, torch.Tensor]]:
    result = None
    for body in bodies:
        result = assembler.add(body) or result
    assert result is not None
    return result


def test_references_assemble_to_the_exact_state(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    bodies = published(publisher, state, version=3)
    assert publisher.transport == "shm" and len(bodies) > 1
    assert all(
        "shm" in b and all("offset" in t and "data" not in t for t in b["tensors"]) for b in bodies
    )
    version, got = assemble(WeightAssembler(state), bodies)
    assert version == 3 and set(got) == set(state)
    for name, tensor in state.items():
        assert torch.equal(got[name], tensor), name
    # The tied tensor is stored once and both names point at it.
    entries = {t["name"]: t for b in bodies for t in b["tensors"]}
    assert entries["lm_head.weight"]["offset"] == entries["model.embed_tokens.weight"]["offset"]
    assert entries["lm_head.weight"]["alias"] == "model.embed_tokens.weight"
    publisher.close()


def test_equal_tensors_are_stored_once_even_when_copied_apart(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    exported = {k: v.clone() for k, v in state.items()}  # a learner's export unties the head
    exported["model.norm.weight"] = -torch.zeros_like(exported["model.norm.weight"])
    exported["model.layers.0.input_layernorm.weight"] = torch.zeros_like(
        exported["model.norm.weight"]
    )
    aliases = duplicate_names(exported)  # the head, and the tiny model's all-ones norms
    assert aliases["lm_head.weight"] == "model.embed_tokens.weight"
    assert "model.norm.weight" not in aliases  # -0.0 is not 0.0, byte for byte
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    bodies = published(publisher, exported, version=1)
    head = next(t for b in bodies for t in b["tensors"] if t["name"] == "lm_head.weight")
    assert head["alias"] == "model.embed_tokens.weight"
    _, got = assemble(WeightAssembler(state), bodies)
    assert all(torch.equal(got[k], v) for k, v in exported.items())
    publisher.close()


def test_an_alias_must_lie_where_its_target_lies(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    bodies = published(publisher, state, version=1)
    head = next(t for b in bodies for t in b["tensors"] if t["name"] == "lm_head.weight")
    head["offset"] += 4  # unchecked bytes, claimed to be the embedding's
    with pytest.raises(WeightUpdateError, match="lacks 1 tensors, e.g. lm_head.weight"):
        assemble(WeightAssembler(state), bodies)
    publisher.close()


def test_the_file_is_safetensors_and_only_the_latest_is_kept(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir)
    path = published(publisher, state, version=1)[0]["shm"]["path"]
    loaded = load_file(path)
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
    aliases = json.loads(meta["arena_aliases"])
    assert meta["arena_version"] == "1" and aliases["lm_head.weight"] == "model.embed_tokens.weight"
    assert set(loaded) == set(state) - set(aliases)
    assert all(torch.equal(loaded[aliases.get(k, k)], v) for k, v in state.items())
    newer = published(publisher, state, version=2)[0]["shm"]["path"]
    assert not os.path.exists(path) and os.path.exists(newer)
    assert [p.name for p in shm_dir.iterdir()] == [Path(newer).name]
    publisher.close()
    assert not list(shm_dir.iterdir())


def test_a_file_is_reused_only_when_no_receiver_holds_it(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    first = published(publisher, state, version=1)
    inode = os.stat(first[0]["shm"]["path"]).st_ino
    second = published(publisher, noisy(state), version=2)  # nobody mapped version 1: reused
    assert os.stat(second[0]["shm"]["path"]).st_ino == inode
    assert not os.path.exists(first[0]["shm"]["path"])
    reader = SharedMemoryReader()
    _, got = assemble(WeightAssembler(state, files=reader), second)  # its tensors hold the lock
    third = published(publisher, state, version=3)
    third_inode = os.stat(third[0]["shm"]["path"]).st_ino
    assert third_inode != inode  # so version 3 got a new file
    assert all(torch.equal(got[k], v) for k, v in noisy(state).items())  # version 2, intact
    assert [p.name for p in shm_dir.iterdir()] == [Path(third[0]["shm"]["path"]).name]
    del got
    fourth = published(publisher, noisy(state), version=4)  # version 3's file is free again
    assert os.stat(fourth[0]["shm"]["path"]).st_ino == third_inode
    publisher.close()


def test_the_same_version_again_stays_in_shared_memory(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    first = published(publisher, state, version=1)
    _, got = assemble(WeightAssembler(state, files=SharedMemoryReader()), first)  # holds the lock
    again = published(publisher, state, version=1)  # re-sent for a late joiner: a new file
    assert publisher.transport == "shm" and all("shm" in b for b in again)
    assert again[0]["shm"]["path"] == first[0]["shm"]["path"]
    version, fresh = assemble(WeightAssembler(state), again)
    assert version == 1 and all(torch.equal(fresh[k], v) for k, v in state.items())
    assert all(torch.equal(got[k], v) for k, v in state.items())  # the first mapping, intact
    assert len(list(shm_dir.iterdir())) == 1
    publisher.close()


def test_each_bucket_is_announced_only_once_its_bytes_are_written(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    writer = SharedMemoryWriter("main", shm_dir)
    groups = plan_buckets(state, 1 << 20)
    seen = []

    def on_bucket(file: Any, index: int, checksum: int) -> None:
        data = map_readonly(file.path, file.size)
        crc = 0
        for name, tensor in groups[index]:
            if name not in file.aliases:  # a tied tensor is checked where its bytes are
                start = file.offsets[name]
                crc = zlib.crc32(data[start : start + tensor.numel() * tensor.element_size()], crc)
        assert crc == checksum  # the bytes are there when the reference goes out
        seen.append(index)

    writer.write(groups, 5, on_bucket)
    assert seen == list(range(len(groups)))
    writer.close()


def test_a_tampered_file_is_refused_and_the_update_dropped(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    bodies = published(publisher, state, version=1)
    entry = bodies[1]["tensors"][0]
    with open(bodies[1]["shm"]["path"], "r+b") as f:
        f.seek(entry["offset"])
        byte = f.read(1)
        f.seek(entry["offset"])
        f.write(bytes([byte[0] ^ 0xFF]))
    assembler = WeightAssembler(state)
    assembler.add(bodies[0])
    with pytest.raises(WeightUpdateError, match="checksum mismatch in bucket 1"):
        assembler.add(bodies[1])
    assert assembler.counters["rejected"] == 1
    publisher.close()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda b: b["tensors"][0].update(offset=1 << 40), "outside the"),
        (lambda b: b["shm"].update(host="another-host:1"), "another host"),
        (lambda b: b["shm"].update(size=b["shm"]["size"] + 1), "expected"),
        (lambda b: b["shm"].update(path="/etc/passwd"), "not an arena weights file"),
        (lambda b: b["shm"].update(path=b["shm"]["path"] + ".gone.safetensors"), "No such file"),
    ],
)
def test_bad_references_are_refused(
    state: dict[str, torch.Tensor], shm_dir: Path, change: Any, match: str
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    body = published(publisher, state, version=1)[0]
    change(body)
    with pytest.raises(WeightUpdateError, match=match):
        WeightAssembler(state).add(body)
    publisher.close()


def test_the_host_id_names_this_kernel_and_filesystem(
    state: dict[str, torch.Tensor], shm_dir: Path, tmp_path: Path
) -> None:
    assert host_id(shm_dir) == host_id("/dev/shm")
    if os.stat(tmp_path).st_dev != os.stat("/dev/shm").st_dev:
        assert host_id(tmp_path) != host_id(shm_dir)
    publisher = WeightPublisher("main", directory=shm_dir)
    ref = published(publisher, state, version=1)[0]["shm"]
    assert SharedMemoryReader().readable(ref)
    assert not SharedMemoryReader().readable(
        {**ref, "host": "another-host:1"}
    )  # so it fetches instead
    publisher.close()


def test_an_older_bucket_does_not_disturb_a_newer_update(state: dict[str, torch.Tensor]) -> None:
    old = list(make_buckets(state, 1, bucket_bytes=1 << 20))
    new = list(make_buckets(state, 2, bucket_bytes=1 << 20))
    assembler = WeightAssembler(state)
    assembler.add(new[0])
    with pytest.raises(StaleBucket, match="older than update 2"):
        assembler.add(old[1])
    version, _ = assemble(assembler, new[1:])
    assert version == 2
    with pytest.raises(StaleBucket, match="not newer than 2"):
        assembler.add(old[0])
    assert assembler.counters["rejected"] == 0 and assembler.counters["stale"] == 2


def test_a_failed_write_falls_back_to_bytes_for_the_same_version(
    state: dict[str, torch.Tensor], shm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher = WeightPublisher("main", directory=shm_dir, bucket_bytes=1 << 20)
    write = SharedMemoryWriter.write

    def fail_after_the_first_bucket(
        self: SharedMemoryWriter, groups: Any, version: int, on_bucket: Any
    ) -> Any:
        def once(file: Any, index: int, checksum: int) -> None:
            on_bucket(file, index, checksum)
            raise OSError(28, "No space left on device")

        return write(self, groups, version, once)

    monkeypatch.setattr(SharedMemoryWriter, "write", fail_after_the_first_bucket)
    assembler, bodies, results = WeightAssembler(state), [], []

    def receive(body: dict[str, Any]) -> None:  # as a receiver would, while the file exists
        bodies.append(body)
        results.append(assembler.add(body))

    publisher.publish(state, 1, receive)
    assert "shm" in bodies[0] and all("shm" not in b for b in bodies[1:])
    assert len(bodies) == 1 + len(plan_buckets(state, 1 << 20))
    assert publisher.transport == "bus" and not list(shm_dir.iterdir())
    version, got = results[-1]
    assert version == 1 and all(torch.equal(got[k], v) for k, v in state.items())


def test_no_shared_memory_means_byte_buckets(
    state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    for publisher in (
        WeightPublisher("main", shm=False),
        WeightPublisher("main", directory=tmp_path / "none"),
    ):
        bodies = published(publisher, state, version=1)
        assert publisher.transport == "bus"
        assert all(
            "shm" not in b and isinstance(b["tensors"][0]["data"], np.ndarray) for b in bodies
        )


def test_orphans_of_dead_writers_are_swept(state: dict[str, torch.Tensor], shm_dir: Path) -> None:
    orphan, alive, fresh = (
        shm_dir / f"arena-weights-x-{tag}-v1.safetensors" for tag in ("dead", "alive", "new")
    )
    for path in (orphan, alive, fresh):
        path.write_bytes(b"x")
    for path in (orphan, alive):
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    holder = os.open(alive, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_SH)  # a live writer's lock
    try:
        publisher = WeightPublisher("main", directory=shm_dir)
        published(publisher, state, version=1)
        assert not orphan.exists() and alive.exists() and fresh.exists()
        publisher.close()
    finally:
        os.close(holder)
