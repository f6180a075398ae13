"""The one dtype table (arena/core/dtypes.py), checked by hand and against torch, numpy and
safetensors themselves.

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_dtypes.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save

from arena.core.dtypes import ALIASES, BY_SAFETENSORS, DTYPES, dtype


def test_hand_checked_values() -> None:
    assert dtype("bfloat16").itemsize == 2 and dtype("bfloat16").is_float
    assert dtype("float32").safetensors == "F32" and dtype("float32").itemsize == 4
    assert dtype("bool").safetensors == "BOOL" and not dtype("bool").is_float
    assert dtype("int64").itemsize == 8 and not dtype("int64").is_float
    assert dtype("bf16") is dtype("bfloat16") and dtype("fp32").name == "float32"
    assert BY_SAFETENSORS["BF16"].name == "bfloat16"


def test_an_unknown_name_raises_naming_the_nearest() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'bfloat61'; did you mean 'bfloat16'"):
        dtype("bfloat61")
    with pytest.raises(ValueError, match="unknown dtype 'complex64'"):
        dtype("complex64")


def test_aliases_name_canonical_dtypes() -> None:
    assert set(ALIASES.values()) <= set(DTYPES)
    assert not set(ALIASES) & set(DTYPES)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_torch_and_numpy_agree_on_the_itemsize(name: str) -> None:
    torch_dtype = getattr(torch, name, None)
    if torch_dtype is not None:  # every torch dtype of that name, the unsigned ones in torch>=2.3
        assert isinstance(torch_dtype, torch.dtype)
        assert torch.empty(0, dtype=torch_dtype).element_size() == DTYPES[name].itemsize
    if name != "bfloat16":  # numpy has none: bfloat16 travels as raw 16-bit words
        assert np.dtype(name).itemsize == DTYPES[name].itemsize
        assert np.dtype(name).name == name


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_the_safetensors_code_is_what_safetensors_writes(name: str) -> None:
    if not hasattr(torch, name):
        pytest.skip(f"this torch has no {name}")
    data = save({"x": torch.zeros(2, dtype=getattr(torch, name))})
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    assert header["x"]["dtype"] == DTYPES[name].safetensors
