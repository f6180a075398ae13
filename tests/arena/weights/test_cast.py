"""Float weights may change float dtype in transit (a float32 learner, a bfloat16 server).

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_cast.py``.
"""

from __future__ import annotations

import pytest
import torch

from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import WeightUpdateError, make_buckets


def test_float32_update_is_cast_for_a_bfloat16_model() -> None:
    served = {"w": torch.zeros(3, 4, dtype=torch.bfloat16)}
    update = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8}
    result = None
    for body in make_buckets(update, version=1):
        result = WeightAssembler(served).add(body)
    assert result is not None
    version, state = result
    assert version == 1 and state["w"].dtype == torch.bfloat16
    assert torch.equal(state["w"], update["w"].to(torch.bfloat16))


def test_int_to_float_is_still_refused() -> None:
    served = {"w": torch.zeros(4, dtype=torch.float32)}
    body = next(make_buckets({"w": torch.zeros(4, dtype=torch.int32)}, version=1))
    with pytest.raises(WeightUpdateError, match="got int32"):
        WeightAssembler(served).add(body)
