"""Delta weight updates (``since``, arena/weights/buckets.py): an update that holds only the
tensors that changed since a version is applied only on top of that version, may leave out only
the tensors the receiver marks separable, and is refused otherwise with "needs a full update".

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_deltas.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import NEEDS_FULL, WeightUpdateError, make_buckets
from arena.weights.publisher import WeightPublisher

SERVED = {"lora_adapter.first": torch.zeros(6), "lora_adapter.second": torch.zeros(4)}
"""What a policy serving two adapters takes updates of: each adapter's buffer, separable."""


def delta(state: dict[str, torch.Tensor], version: int, since: int) -> list[dict[str, Any]]:
    return [b | {"since": since} for b in make_buckets(state, version)]


def apply(assembler: WeightAssembler, bodies: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    done = None
    for body in bodies:
        done = assembler.add(body) or done
    assert done is not None
    return done[1]


def assembler(served: int = 0, expected: dict[str, torch.Tensor] = SERVED) -> WeightAssembler:
    out = WeightAssembler(expected, separable=list(SERVED))
    out.last_version = served
    return out


def test_a_delta_on_the_served_version_carries_only_what_changed() -> None:
    receiver = assembler(served=3)
    state = apply(receiver, delta({"lora_adapter.first": torch.full((6,), 2.0)}, 4, since=3))
    assert list(state) == ["lora_adapter.first"] and state["lora_adapter.first"].sum() == 12.0
    assert receiver.last_version == 4 and receiver.counters["applied"] == 1
    # nothing changed at all: an empty delta still moves the version on
    assert apply(receiver, delta({}, 5, since=4)) == {} and receiver.last_version == 5


def test_a_delta_against_another_version_needs_a_full_update() -> None:
    receiver = assembler(served=2)  # it missed version 3
    with pytest.raises(
        WeightUpdateError, match=f"since version 3, but version 2 is served: it {NEEDS_FULL}"
    ):
        apply(receiver, delta({"lora_adapter.first": torch.ones(6)}, 4, since=3))
    assert receiver.last_version == 2 and receiver.counters["rejected"] == 1
    full = {name: torch.ones_like(t) for name, t in SERVED.items()}
    assert set(apply(receiver, list(make_buckets(full, 4)))) == set(SERVED)


def test_only_separable_tensors_may_be_left_out() -> None:
    receiver = assembler(served=0, expected=SERVED | {"frozen": torch.zeros(2)})
    with pytest.raises(WeightUpdateError, match="lacks 1 tensors, e.g. frozen"):
        apply(receiver, delta({"lora_adapter.first": torch.ones(6)}, 1, since=0))
    # and a full update (no since) must carry every tensor, separable ones too
    with pytest.raises(WeightUpdateError, match="lacks 2 tensors"):
        apply(receiver, list(make_buckets({"frozen": torch.ones(2)}, 1)))
    assert receiver.counters["rejected"] == 2 and receiver.last_version == 0


def test_a_garbled_since_is_refused() -> None:
    receiver = assembler()
    for since in ("3", True, 2.5):
        with pytest.raises(WeightUpdateError, match="since must be an integer version"):
            receiver.add(next(make_buckets(dict(SERVED), 1)) | {"since": since})


def test_the_publisher_marks_every_bucket_of_a_delta(shm_dir: Path) -> None:
    for shm in (True, False):
        publisher = WeightPublisher("main", shm=shm, directory=shm_dir, bucket_bytes=16)
        bodies: list[dict[str, Any]] = []
        changed = {"lora_adapter.first": torch.ones(6), "lora_adapter.second": torch.ones(4)}
        publisher.publish(changed, 8, bodies.append, since=7)
        assert len(bodies) == 2 and all(b["since"] == 7 for b in bodies)
        receiver = assembler(served=7)
        assert set(apply(receiver, bodies)) == set(changed)
        empty: list[dict[str, Any]] = []
        publisher.publish({}, 9, empty.append, since=8)  # an empty delta is one empty bucket
        assert apply(receiver, empty) == {} and receiver.last_version == 9
        publisher.close()
