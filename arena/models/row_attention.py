"""Attention of each row of a padded batch over its own tokens only, so that a row's scores do
not depend on what else shares its batch.

A batch of left-padded rows computes the same numbers as each row alone in exact arithmetic,
but not in floating point: the padding shifts where a row's columns fall in the attention's
reductions, which then round differently. In bfloat16 that moves a reply's log-probability by
up to ~0.2 (SmolLM2-135M, Tic-Tac-Toe prompts), enough to flip a sampled choice, so a
tournament's matches would depend on which other matches were in flight. Here each row's
queries and keys are cut to its real tokens (in the order they have alone) and attended by
the model's own eager kernel (``sdpa`` where it has none) one row at a time; the linear
layers, most of the work, still run on the whole batch (their rows do not interact). A request then scores alike alone, in any batch, and past a
cached prefix (tested in ``tests/arena/policies/test_prefix_cache.py``).

:func:`rows_apart` runs a model's forwards inside with this attention; the forward gets each
row's spans as the keyword arguments :func:`row_spans` returns.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "arena_rows"


def row_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    *,
    row_queries: Sequence[int],
    row_keys: Sequence[torch.Tensor],
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``[rows, queries, heads, dim]``: row ``b``'s queries from column ``row_queries[b]`` on
    attend to its key columns ``row_keys[b]`` under ``attention_mask`` (4D, True: may attend; a
    bool mask serves any dtype, an adapted bf16 model's float32 queries included); the padding
    queries before them get zeros."""
    # an adapted layer of a half-precision base returns float32: attend in the wider dtype
    dtype = torch.promote_types(torch.promote_types(query.dtype, key.dtype), value.dtype)
    query, key, value = query.to(dtype), key.to(dtype), value.to(dtype)
    rows, _, width, dim = query.shape
    out = query.new_zeros((rows, width, query.shape[1], dim))
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    for b in range(rows):
        first, columns = row_queries[b], row_keys[b]
        mask = None
        if attention_mask is not None:
            sees = attention_mask[b : b + 1, :, first:].index_select(3, columns)
            blocked = torch.finfo(dtype).min
            mask = torch.zeros(sees.shape, dtype=dtype, device=sees.device)
            mask.masked_fill_(~sees, blocked)
        parts = (
            query[b : b + 1, :, first:].contiguous(),
            key[b : b + 1].index_select(2, columns).contiguous(),
            value[b : b + 1].index_select(2, columns).contiguous(),
        )
        if eager is not None:  # the model's own kernel, as it attends unpadded
            got, _ = eager(module, *parts, mask, scaling=scaling, dropout=dropout)
        else:
            got, _ = sdpa_attention_forward(
                module, *parts, mask, scaling=scaling, dropout=dropout, is_causal=False
            )
        out[b, first:] = got[0]
    return out, None


AttentionInterface.register(NAME, row_attention)


def row_spans(
    past: int, cached: Sequence[int], width: int, lengths: Sequence[int], device: torch.device
) -> dict[str, Any]:
    """The forward's keyword arguments for rows laid as ``past`` columns of cache (row ``b``'s
    ``cached[b]`` at their end) then ``width`` new ones (row ``b``'s ``lengths[b]`` at their
    end)."""
    return {
        "row_queries": [width - n for n in lengths],
        "row_keys": [
            torch.cat(
                [torch.arange(past - c, past), torch.arange(past + width - n, past + width)]
            ).to(device)
            for c, n in zip(cached, lengths, strict=True)
        ],
    }


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
