"""Row attention (arena/models/row_attention.py): rows laid alike attend in one call per layer,
in calls of a fixed size where a device asks for it, and each row's scores stay exactly those it
has alone.

Run with ``.venv/bin/python -m pytest -q tests/arena/models/test_row_attention.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arena.models import row_attention
from arena.models.row_attention import row_spans
from arena.policies.scoring import continuation_logprobs

PROMPTS = [np.random.default_rng(i).integers(1, 1000, size=30).astype(np.int32) for i in range(7)]
REPLIES = [[np.array([21, 22], dtype=np.int32), np.array([23], dtype=np.int32)]] * 7
"""Seven prompts of 30 tokens, each with the same two replies: every row laid alike."""


def test_rows_are_grouped_by_their_layout_and_cut_into_calls_of_a_fixed_size(monkeypatch) -> None:
    # rows 0 and 2: 16 cached + 5 new; row 1: 0 + 5; row 3: 16 + 3 (past 16, width 5)
    spans = row_spans(16, [16, 0, 16, 16], 5, [5, 5, 5, 3], torch.device("cpu"))["row_groups"]
    laid = [(g.rows.tolist(), g.real, g.first, g.columns.tolist()) for g in spans]
    assert laid == [
        ([0, 2], 2, 0, list(range(0, 21))),
        ([1], 1, 0, list(range(16, 21))),
        ([3], 1, 2, list(range(0, 16)) + [18, 19, 20]),
    ]
    monkeypatch.setitem(row_attention.ROWS_PER_CALL, "cpu", 3)
    # seven rows alike: calls of 3, 3, and 1 filled with repeats; row 1 alone, in order of first
    # appearance
    rows = [0, 2, 3, 4, 5, 6, 7]
    spans = row_spans(0, [0] * 8, 4, [4, 1, 4, 4, 4, 4, 4, 4], torch.device("cpu"))["row_groups"]
    laid = [(g.rows.tolist(), g.real) for g in spans]
    assert laid == [(rows[0:3], 3), (rows[3:6], 3), ([7, 7, 7], 1), ([1, 1, 1], 1)]


@pytest.mark.parametrize("rows_per_call", [None, 3])
def test_rows_alike_attend_together_and_score_exactly_as_each_alone(
    tiny_model, monkeypatch, device: str, rows_per_call: int | None
) -> None:
    """bfloat16, where a row attended among padding moves by a rounding step: exact equality,
    on each device (a GPU's kernels may be chosen by the batch's size). With a fixed size of 3,
    the seven rows take calls of 3, 3 and 1 row plus 2 repeats."""
    model, _ = tiny_model
    model.to(device=device, dtype=torch.bfloat16)
    monkeypatch.setitem(row_attention.ROWS_PER_CALL, device, rows_per_call)
    calls: list[int] = []
    attend = row_attention.row_attention

    def counted(module, query, *args, **kwargs):
        calls.extend(g.rows.numel() for g in kwargs["row_groups"])
        return attend(module, query, *args, **kwargs)

    monkeypatch.setitem(
        row_attention.AttentionInterface._global_mapping, row_attention.NAME, counted
    )
    alone = [
        continuation_logprobs(model, [(p, r)])[0] for p, r in zip(PROMPTS, REPLIES, strict=True)
    ]
    calls.clear()
    together = continuation_logprobs(model, list(zip(PROMPTS, REPLIES, strict=True)), batch_size=16)
    layers = model.config.num_hidden_layers
    assert calls == ([7] if rows_per_call is None else [3, 3, 3]) * layers
    for got, want in zip(together, alone, strict=True):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_row_attends_alike_alone_and_among_any_number_of_rows(tiny_model, device: str) -> None:
    """The default calls of each device: on an H200, rows attended all at once came out other
    than alone among 7, 64, 100 and 256 rows (the GPU picks its kernels by the batch's size);
    in calls of 64 rows they did not."""
    model, _ = tiny_model
    attention = model.to(device).model.layers[0].self_attn
    generator = torch.Generator(device=device).manual_seed(0)

    def random(heads: int) -> torch.Tensor:
        shape = (256, heads, 40, 16)
        return torch.randn(shape, generator=generator, device=device, dtype=torch.bfloat16)

    query, key, value = random(4), random(2), random(2)
    causal = torch.ones((256, 1, 40, 40), dtype=torch.bool, device=device).tril()
    outs = {}
    for rows in (1, 7, 64, 100, 256):
        spans = row_spans(0, [0] * rows, 40, [40] * rows, torch.device(device))
        got, _ = row_attention.row_attention(
            attention, query[:rows], key[:rows], value[:rows], causal[:rows], 0.25, **spans
        )
        outs[rows] = got[0]
    for rows, got in outs.items():
        assert torch.equal(got, outs[1]), f"row 0 among {rows} rows"
