"""Weight epochs: a restarted publisher's versions start again from its checkpoint's.

In one process, with the tiny model: an update of a newer epoch is taken even when its version is
not newer (the served weights roll back), buckets of the older epoch are stale from then on,
versions compare as before within one epoch and without epochs, a garbled epoch is refused, and
the publisher puts its epoch on every bucket, the bytes its fetch service answers included.

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_epochs.py``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from arena.models import tiny_model
from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import StaleBucket, WeightUpdateError, make_buckets
from arena.weights.publisher import WeightPublisher


@pytest.fixture(scope="module")
def state() -> dict[str, torch.Tensor]:
    model, _ = tiny_model(seed=0)
    return model.state_dict()


def buckets(
    state: dict[str, torch.Tensor], version: int, epoch: int | None
) -> list[dict[str, Any]]:
    bodies = list(make_buckets(state, version, bucket_bytes=1 << 20))
    return bodies if epoch is None else [b | {"epoch": epoch} for b in bodies]


def assemble(assembler: WeightAssembler, bodies: list[dict[str, Any]]) -> int:
    done = None
    for body in bodies:
        done = assembler.add(body) or done
    assert done is not None
    return done[0]


def test_a_newer_epoch_rolls_back_and_the_older_one_is_stale(
    state: dict[str, torch.Tensor],
) -> None:
    rolled = {k: v + 1.0 for k, v in state.items()}
    assembler = WeightAssembler(state)
    assembler.last_version = 0  # a fresh receiver serves version 0 and knows no epoch
    assert assemble(assembler, buckets(state, 3, epoch=100)) == 3
    assert assembler.last_epoch == 100
    # the publisher restarted from its checkpoint at version 2: taken, although not newer
    for body in buckets(rolled, 2, epoch=200)[:-1]:
        assert assembler.add(body) is None
    last = buckets(rolled, 2, epoch=200)[-1]
    version, got = assembler.add(last)
    assert version == 2 and assembler.last_epoch == 200
    assert torch.equal(got["model.norm.weight"], rolled["model.norm.weight"])
    # the dead publisher's buckets, still on their way, are stale now, even a newer version
    with pytest.raises(StaleBucket, match="restarted since"):
        assembler.add(buckets(state, 4, epoch=100)[0])
    # within the new epoch versions compare as before
    with pytest.raises(StaleBucket, match="not newer than 2"):
        assembler.add(buckets(rolled, 2, epoch=200)[0])
    assert assemble(assembler, buckets(rolled, 3, epoch=200)) == 3
    # a bucket without an epoch compares versions only
    with pytest.raises(StaleBucket, match="not newer than 3"):
        assembler.add(buckets(state, 3, epoch=None)[0])
    assert assemble(assembler, buckets(state, 4, epoch=None)) == 4
    assert assembler.last_epoch == 200
    assert assembler.counters["stale"] == 3 and assembler.counters["rejected"] == 0


def test_an_update_in_progress_gives_way_to_a_newer_epoch_only(
    state: dict[str, torch.Tensor],
) -> None:
    assembler = WeightAssembler(state)
    old = buckets(state, 5, epoch=100)
    assembler.add(old[0])
    with pytest.raises(StaleBucket, match="older than update 5"):
        assembler.add(buckets(state, 6, epoch=50)[0])  # an even older publisher's
    assert assemble(assembler, buckets(state, 1, epoch=300)) == 1  # drops update 5
    assert assembler.counters["rejected"] == 1  # the incomplete update 5


def test_a_garbled_epoch_is_refused(state: dict[str, torch.Tensor]) -> None:
    assembler = WeightAssembler(state)
    body = buckets(state, 1, epoch=None)[0] | {"epoch": "yesterday"}
    with pytest.raises(WeightUpdateError, match="epoch must be an integer"):
        assembler.add(body)


def test_the_publisher_puts_its_epoch_on_every_bucket(
    state: dict[str, torch.Tensor], shm_dir: Path
) -> None:
    for directory, shm in ((shm_dir, True), (shm_dir, False)):
        publisher = WeightPublisher(
            "main", shm=shm, directory=directory, bucket_bytes=1 << 20, epoch=77
        )
        bodies: list[dict[str, Any]] = []
        publisher.publish(state, 1, bodies.append)
        assert len(bodies) > 1 and all(b["epoch"] == 77 for b in bodies)
        assert all(("shm" in b) == shm for b in bodies)
        if shm:  # a receiver on another host fetches the bytes: they carry the epoch too
            request = SimpleNamespace(body={"version": 1, "bucket": 1})
            fetched = publisher._on_fetch(request)  # type: ignore[arg-type]
            assert fetched["epoch"] == 77 and "shm" not in fetched
        publisher.close()
    unnamed: list[dict[str, Any]] = []
    WeightPublisher("main", shm=False).publish(state, 1, unnamed.append)
    assert all("epoch" not in b for b in unnamed)
