"""KV blocks of prompt prefixes kept across requests of one set of weights, and the prefill that
computes only what is past a prompt's longest cached prefix.

A prompt is cut into blocks of :data:`BLOCK` tokens. Block ``b`` is keyed by a digest chained
over the adapter's name and every token up to the block's end, so one key names one whole
prefix: two prompts share a block exactly when they share every token before its end (and
the adapter). A block holds that span's keys and values for every layer, as the model cached
them, RoPE already applied: a prefix computed at positions ``0..c-1`` is valid for any prompt
that starts with it.

:func:`prefill` runs one batch of prompts: each row's cached blocks are laid left-padded in a
past of common width, its uncached suffix left-padded after them, the gaps masked out, and
position ids given explicitly, so one forward computes every row's suffix at once. The new
full blocks are stored afterwards.

The cache is bounded in bytes and evicts the least recently used block. A prompt's blocks are
touched deepest first, so its first block is the most recent of them and eviction takes a
chain's tail before its head (a block is useless once one before it is gone). The owner calls
:meth:`PrefixCache.reset` at every weight change; each block carries the weights' version and
a read under another version raises :class:`StaleCache`.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from arena.models.lora import route

log = logging.getLogger(__name__)

BLOCK = 16
"""Tokens per cached block: small enough that a prompt loses little past its last full block,
large enough that the per-block bookkeeping (a digest, a dict entry, a copy) stays cheap."""


class StaleCache(RuntimeError):
    """A cached block was about to be read under other weights than the ones that made it."""


@dataclass
class _Block:
    version: int
    kv: torch.Tensor
    """``[layers, 2 (keys, values), kv heads, BLOCK, head dim]``."""


class PrefixCache:
    """KV blocks keyed by (adapter, token prefix), at most ``max_bytes`` of them, LRU.

    Not thread-safe: the owner calls it under the lock that guards its weights."""

    def __init__(self, max_bytes: int, version: int = 0, block: int = BLOCK) -> None:
        self.max_bytes = max_bytes
        self.block = block
        self.version = version
        """The weights the held blocks were computed by."""
        self._blocks: OrderedDict[bytes, _Block] = OrderedDict()
        self.bytes = 0
        self.prompt_tokens = 0
        """Prompt tokens asked for since the cache was made (counters survive a reset)."""
        self.reused_tokens = 0
        """Of those, the ones read from the cache instead of computed."""
        self._warned = False

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, key: bytes) -> bool:
        return key in self._blocks

    def reset(self, version: int) -> None:
        """Drop every block: the weights are now ``version``."""
        self._blocks.clear()
        self.bytes = 0
        self.version = version

    def fits(self, blocks: int, block_bytes: int) -> bool:
        """Whether a prompt of ``blocks`` full blocks fits the bound at all; logs the first
        that does not (it then runs uncached: the cache only ever saves work)."""
        if blocks * block_bytes <= self.max_bytes:
            return True
        if not self._warned:
            log.warning(
                "a prompt of %d tokens needs %.1f MB of prefix cache, more than its bound of "
                "%.1f MB: such prompts run uncached",
                blocks * self.block,
                blocks * block_bytes / 2**20,
                self.max_bytes / 2**20,
            )
            self._warned = True
        return False

    def keys(self, tokens: np.ndarray, adapter: str | None) -> list[bytes]:
        """The key of each full block of ``tokens``: a digest of the adapter and all tokens up
        to the block's end, chained so that each costs one block's hashing."""
        digest = hashlib.blake2b(repr(adapter).encode(), digest_size=16).digest()
        data = np.ascontiguousarray(tokens, dtype=np.int64)
        out = []
        for end in range(self.block, len(data) + 1, self.block):
            digest = hashlib.blake2b(
                digest + data[end - self.block : end].tobytes(), digest_size=16
            ).digest()
            out.append(digest)
        return out

    def lookup(self, keys: Sequence[bytes], version: int) -> list[torch.Tensor]:
        """The held blocks of the longest cached prefix among ``keys`` (each block's kv)."""
        found = []
        for key in keys:
            held = self._blocks.get(key)
            if held is None:
                break
            if held.version != version:
                raise StaleCache(
                    f"a prefix block of weights version {held.version} read under {version}"
                )
            found.append(held.kv)
        return found

    def cached_tokens(self, tokens: np.ndarray, adapter: str | None, version: int) -> int:
        """How many of ``tokens``' first tokens a request would read from the cache now (its
        last token is always computed)."""
        keys = self.keys(tokens[: len(tokens) - 1], adapter)
        return len(self.lookup(keys, version)) * self.block

    def store(self, keys: Sequence[bytes], blocks: dict[int, torch.Tensor], version: int) -> None:
        """Hold ``blocks`` (index into ``keys`` -> kv) beside those of ``keys`` already held,
        touch the whole chain deepest first, then evict down to the bound."""
        if version != self.version:
            raise StaleCache(
                f"blocks of weights version {version} stored in a cache of {self.version}"
            )
        for index, kv in blocks.items():
            if keys[index] not in self._blocks:
                self._blocks[keys[index]] = _Block(version, kv)
                self.bytes += kv.numel() * kv.element_size()
        for key in reversed(keys):
            if key in self._blocks:
                self._blocks.move_to_end(key)
        while self.bytes > self.max_bytes:
            _, dropped = self._blocks.popitem(last=False)
            self.bytes -= dropped.kv.numel() * dropped.kv.element_size()


def usable(model: Any) -> bool:
    """Whether a model's KV cache can be cut into blocks: every layer a full-attention one
    (a sliding-window layer drops old columns, so its cache is not a prefix's)."""
    return not any(DynamicCache(config=model.config).is_sliding)


@dataclass
class Prefill:
    """A batch of prompts computed: what decoding or scoring continues from."""

    logits: torch.Tensor
    """``[rows, vocab]``: the logits after each prompt's last token."""
    kv: DynamicCache
    mask: torch.Tensor
    """``[rows, columns]`` (long, on the model's device): which of ``kv``'s columns are tokens."""
    last_position: torch.Tensor
    """``[rows, 1]``: the position id of each prompt's last token."""
    computed: int
    """Prompt tokens this forward computed (the rest were read from the cache)."""


@dataclass
class Past:
    """A batch's cached prefixes, laid left-padded in one KV cache: what its forward continues."""

    keys: list[list[bytes]]
    """Each row's block keys (empty without a cache)."""
    cached: list[int]
    """Each row's tokens read from the cache."""
    kv: DynamicCache
    mask: torch.Tensor
    """``[rows, width]`` (long, on the CPU): which of ``kv``'s columns are tokens."""

    def store(self, cache: PrefixCache | None, starts: Sequence[int], version: int) -> None:
        """After the forward: keep each row's new full blocks, row ``i``'s first uncached
        token sitting in column ``starts[i]`` of :attr:`kv`."""
        if cache is None:
            return
        spans = _new_spans(cache, self.kv, self.keys, self.cached, starts)
        for row, span in enumerate(spans):
            _store_row(cache, span, self.keys[row], self.cached[row], version)


def cached_past(
    model: Any,
    prompts: Sequence[np.ndarray],
    adapters: Sequence[str | None],
    cache: PrefixCache | None = None,
    version: int = 0,
) -> Past:
    """Each prompt's longest prefix held in ``cache`` (blocks of weights ``version``), short
    of its last token, laid left-padded in one KV cache."""
    rows = len(prompts)
    keys = [
        cache.keys(p, a) if cache is not None else []
        for p, a in zip(prompts, adapters, strict=True)
    ]
    # at least the last token is computed: its logits predict the continuation
    hits = [
        cache.lookup(k[: (len(p) - 1) // cache.block], version) if cache is not None else []
        for p, k in zip(prompts, keys, strict=True)
    ]
    cached = [len(h) * (cache.block if cache is not None else 0) for h in hits]
    past = max(cached)
    kv = DynamicCache(config=model.config)
    past_mask = torch.zeros((rows, past), dtype=torch.long)
    if past:
        first = next(h[0] for h in hits if h)
        layers, _, heads, _, dim = first.shape
        stacked = first.new_zeros((layers, 2, rows, heads, past, dim))
        for row, held in enumerate(hits):
            if held:
                stacked[:, :, row, :, past - cached[row] :] = torch.cat(held, dim=3)
                past_mask[row, past - cached[row] :] = 1
        for layer in range(layers):
            kv.update(stacked[layer, 0], stacked[layer, 1], layer)
    if cache is not None:
        cache.prompt_tokens += sum(len(p) for p in prompts)
        cache.reused_tokens += sum(cached)
    return Past(keys, cached, kv, past_mask)


@torch.inference_mode()
def prefill(
    model: Any,
    prompts: Sequence[np.ndarray],
    adapters: Sequence[str | None],
    cache: PrefixCache | None = None,
    version: int = 0,
) -> Prefill:
    """Compute ``prompts`` (row ``i`` through adapter ``adapters[i]``) in one forward, each
    from past its longest prefix held in ``cache`` (whose blocks must be of weights
    ``version``), and store their new full blocks there."""
    device = next(model.parameters()).device
    rows = len(prompts)
    held = cached_past(model, prompts, adapters, cache, version)
    cached = held.cached
    suffix = [len(p) - c for p, c in zip(prompts, cached, strict=True)]
    past, width = held.mask.shape[1], max(suffix)
    ids = torch.zeros((rows, width), dtype=torch.long)
    new_mask = torch.zeros((rows, width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - suffix[row] :] = torch.as_tensor(prompt[cached[row] :], dtype=torch.long)
        new_mask[row, width - suffix[row] :] = 1
    positions = (new_mask.cumsum(-1) - 1).clamp(min=0) + torch.tensor(cached)[:, None]
    mask = torch.cat([held.mask, new_mask], dim=1).to(device)
    with route(model, list(adapters)):
        logits = model(
            input_ids=ids.to(device),
            attention_mask=mask,
            position_ids=positions.to(device),
            past_key_values=held.kv,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
    held.store(cache, [past + width - s for s in suffix], version)
    return Prefill(logits, held.kv, mask, positions[:, -1:].to(device), sum(suffix))


def _new_spans(
    cache: PrefixCache,
    kv: DynamicCache,
    keys: Sequence[list[bytes]],
    cached: Sequence[int],
    starts: Sequence[int],
) -> list[torch.Tensor | None]:
    """Each row's full blocks past its cached ones, ``[layers, 2, heads, tokens, dim]`` copied
    out of ``kv`` (None: no new full block, or more than the cache can hold). Rows whose spans
    lie in the same columns are copied together: one copy per layer for a whole batch, where a
    copy per row and layer made a GPU wait on thousands of small launches."""
    layer = kv.layers[0]
    block_bytes = (
        2 * len(kv.layers) * layer.keys[0, :, : cache.block].numel() * layer.keys.element_size()
    )
    alike: dict[tuple[int, int], list[int]] = {}
    for row, (row_keys, start) in enumerate(zip(keys, starts, strict=True)):
        new = len(row_keys) - cached[row] // cache.block
        if new > 0 and cache.fits(len(row_keys), block_bytes):
            alike.setdefault((start, start + new * cache.block), []).append(row)
    spans: list[torch.Tensor | None] = [None] * len(keys)
    for (start, end), rows in alike.items():
        picked = torch.tensor(rows, device=layer.keys.device)
        # [rows, layers, 2, heads, tokens, dim]
        copied = torch.stack(
            [
                torch.stack(
                    [
                        one.keys[:, :, start:end].index_select(0, picked),
                        one.values[:, :, start:end].index_select(0, picked),
                    ],
                    dim=1,
                )
                for one in kv.layers
            ],
            dim=1,
        )
        for i, row in enumerate(rows):
            spans[row] = copied[i]
    return spans


def _store_row(
    cache: PrefixCache,
    span: torch.Tensor | None,
    keys: list[bytes],
    cached: int,
    version: int,
) -> None:
    """Store a row's full blocks past its first ``cached`` tokens (read from the cache), which
    ``span`` holds (:func:`_new_spans`), and touch its chain."""
    if span is None:
        if cached // cache.block < len(keys):  # its blocks do not fit the cache at all
            return
        cache.store(keys, {}, version)
        return
    first = cached // cache.block
    blocks: dict[int, torch.Tensor] = {}
    for b in range(first, len(keys)):
        if keys[b] not in cache:
            at = (b - first) * cache.block
            blocks[b] = span[:, :, :, at : at + cache.block].clone()
    cache.store(keys, blocks, version)
