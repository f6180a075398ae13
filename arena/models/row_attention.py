"""Attention of each row of a padded batch over its own tokens only, so that a row's scores do
not depend on what else shares its batch.

A batch of left-padded rows computes the same numbers as each row alone in exact arithmetic,
but not in floating point: the padding shifts where a row's columns fall in the attention's
reductions, which then round differently. In bfloat16 that moves a reply's log-probability by
up to ~0.2 (SmolLM2-135M, Tic-Tac-Toe prompts), enough to flip a sampled choice, so a
tournament's matches would depend on which other matches were in flight. Here each row's
queries and keys are cut to its real tokens (in the order they have alone) and attended by
the model's own eager kernel (``sdpa`` where it has none); rows laid alike (as many cached and
new tokens) attend together, since nothing pads between them, in calls of a fixed size on a
GPU (:data:`ROWS_PER_CALL`). The linear layers, most of the work, run on the whole batch. A
request then scores alike alone, in any batch, and past a cached prefix (tested in
``tests/arena/policies/test_prefix_cache.py`` and here), as far as the linear layers' matrix
kernels round a row alike whatever the batch's size: they did on an H200 (SmolLM2-135M's shape,
bf16, 30 requests alone and together: equal); on an AVX-512 CPU without native bf16 a 576-wide
bf16 layer rounds a row by the batch's size, and a reply's log-probability then moves by up to
0.02 (float32: 2e-6; the tests' tiny model: equal). Attending each row alone made a GPU
wait on 30 layers x 256 rows of small launches (82-109 Tic-Tac-Toe turns/s on an H200; grouped,
1,002).

:func:`rows_apart` runs a model's forwards inside with this attention; the forward gets each
row's spans as the keyword arguments :func:`row_spans` returns.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "arena_rows"


ROWS_PER_CALL: dict[str, int | None] = {"cpu": None}
"""Per device type, the rows one attention call takes (:data:`GPU_ROWS_PER_CALL` for a type not
named here). None: a group's rows all at once, where a batched matmul computes each matrix of
its batch alike whatever the batch's size (CPUs, tested). A number ``G``: calls of exactly ``G``
rows, the last filled with repeats, where kernels are chosen by the batch's size and round
differently: on an H200, a row attended among 7, 64, 100 or 256 rows came out other than alone,
and in calls of 64 it did not (docs/gpu.md)."""

GPU_ROWS_PER_CALL = 64
"""Rows per attention call on a device :data:`ROWS_PER_CALL` does not name: a GPU. 64 rows
(576 heads' matrices) fill an H200's launch; 256 Tic-Tac-Toe turns take 4 calls a layer."""


@dataclass(frozen=True)
class RowGroup:
    """Rows of one forward laid alike (the same cached and new columns), attended in one call."""

    rows: torch.Tensor
    """The rows' indices in the batch, on the model's device (repeats past :attr:`real`)."""
    real: int
    """How many of :attr:`rows` are distinct rows; the rest repeat them to a fixed size."""
    first: int
    """The column of the rows' first real query."""
    columns: torch.Tensor
    """The key columns the rows attend to, in the order they have alone."""


def row_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    *,
    row_groups: Sequence[RowGroup],
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``[rows, queries, heads, dim]``: each group's rows attend, from column ``first`` on, to
    the group's key ``columns`` under ``attention_mask`` (4D, True: may attend; a bool mask
    serves any dtype, an adapted bf16 model's float32 queries included); the padding queries
    before them get zeros."""
    # an adapted layer of a half-precision base returns float32: attend in the wider dtype
    dtype = torch.promote_types(torch.promote_types(query.dtype, key.dtype), value.dtype)
    query, key, value = query.to(dtype), key.to(dtype), value.to(dtype)
    rows, _, width, dim = query.shape
    out = query.new_zeros((rows, width, query.shape[1], dim))
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    for group in row_groups:
        first, columns, picked = group.first, group.columns, group.rows
        mask = None
        if attention_mask is not None:
            sees = attention_mask[:, :, first:].index_select(0, picked).index_select(3, columns)
            mask = torch.zeros(sees.shape, dtype=dtype, device=sees.device)
            mask.masked_fill_(~sees, torch.finfo(dtype).min)
        parts = (
            query[:, :, first:].index_select(0, picked),
            key.index_select(0, picked).index_select(2, columns),
            value.index_select(0, picked).index_select(2, columns),
        )
        if eager is not None:  # the model's own kernel, as it attends unpadded
            got, _ = eager(module, *parts, mask, scaling=scaling, dropout=dropout)
        else:
            got, _ = sdpa_attention_forward(
                module, *parts, mask, scaling=scaling, dropout=dropout, is_causal=False
            )
        out[picked[: group.real], first:] = got[: group.real]
    return out, None


AttentionInterface.register(NAME, row_attention)


def row_spans(
    past: int, cached: Sequence[int], width: int, lengths: Sequence[int], device: torch.device
) -> dict[str, Any]:
    """The forward's keyword arguments for rows laid as ``past`` columns of cache (row ``b``'s
    ``cached[b]`` at their end) then ``width`` new ones (row ``b``'s ``lengths[b]`` at their
    end): the rows grouped by that layout, in calls of :data:`ROWS_PER_CALL` rows."""
    alike: dict[tuple[int, int], list[int]] = {}
    for row, layout in enumerate(zip(cached, lengths, strict=True)):
        alike.setdefault(layout, []).append(row)
    size = ROWS_PER_CALL.get(device.type, GPU_ROWS_PER_CALL)
    groups = []
    for (c, n), members in alike.items():
        columns = torch.cat(
            [torch.arange(past - c, past), torch.arange(past + width - n, past + width)]
        ).to(device)
        step = size or len(members)
        for start in range(0, len(members), step):
            chunk = members[start : start + step]
            filled = chunk + chunk[:1] * (step - len(chunk))
            rows = torch.tensor(filled, dtype=torch.long).to(device)
            groups.append(RowGroup(rows, len(chunk), width - n, columns))
    return {"row_groups": groups}


@contextmanager
def rows_apart(model: Any) -> Iterator[None]:
    """Inside, ``model``'s attention is :func:`row_attention` (its forwards need
    :func:`row_spans`' arguments). The caller holds the lock that keeps other forwards out."""
    config = model.config
    previous = config._attn_implementation
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = previous
