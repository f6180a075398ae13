"""The bucket format: tensor specs, sizes, and entries garbled in transit (in one process).

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_buckets.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from arena.core.dtypes import DTYPES
from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import (
    TensorSpec,
    WeightUpdateError,
    make_buckets,
    tensor_nbytes,
    tensor_specs,
    torch_dtype,
)


def test_specs_and_sizes() -> None:
    state = {"w": torch.zeros(3, 4, dtype=torch.bfloat16), "b": torch.zeros((), dtype=torch.int64)}
    specs = tensor_specs(state)
    assert specs == {"w": TensorSpec((3, 4), "bfloat16"), "b": TensorSpec((), "int64")}
    assert specs["w"].nbytes == tensor_nbytes(state["w"]) == 24 and specs["b"].nbytes == 8
    assert specs["w"].shape == (3, 4) and specs["w"].dtype == "bfloat16"
    with pytest.raises(WeightUpdateError, match="unknown dtype 'complex64'"):
        _ = TensorSpec((2,), "complex64").nbytes


def test_every_dtype_of_the_table_can_travel() -> None:
    for name in DTYPES:
        if hasattr(torch, name):
            assert torch_dtype(name) == getattr(torch, name)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("name", ["w"], "unknown tensor"),
        ("dtype", ["float32"], r"got \['float32'\]\[4\]"),
        ("dtype", "complex64", "got complex64"),
        ("shape", 4, "got float32 shape 4,"),
        ("shape", [2, 2], r"got float32\[2, 2\]"),
    ],
)
def test_garbled_entries_are_refused_not_raised_through(field: str, value: Any, match: str) -> None:
    body = next(make_buckets({"w": torch.zeros(4)}, version=1))
    body["tensors"][0][field] = value
    with pytest.raises(WeightUpdateError, match=match):
        WeightAssembler({"w": torch.zeros(4)}).add(body)
