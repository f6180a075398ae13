"""Scoring continuations of a prompt by teacher forcing, the prompt computed once.

:func:`continuation_logprobs` is the one implementation behind :meth:`HFPolicy.score
<arena.policies.hf.HFPolicy.score>` (a seat choosing among its legal replies) and the exact
policy reader (:mod:`arena.eval.policy_reader`, through :func:`continuation_sums`). A batch of prompts goes
through one forward: each row holds a prompt with all its continuations packed after it, and a 4D
attention mask lets a continuation see the prompt and its own earlier tokens only, its position
ids starting right after the prompt. So N replies cost one pass of the prompt plus their own
tokens, not N passes, there is one forward per batch however many replies, and only the columns
that predict a reply token go through the output head. Given a
:class:`~arena.policies.prefix_cache.PrefixCache`, a prompt is computed only past the longest
prefix an earlier request of the same weights and adapter left there.

:class:`ScoreMemo` keeps what one set of weights has scored: a game whose prompts repeat (Kuhn
Poker has 12 information states) is scored once per weight version, however many hands are
played, and a repeated prompt gets the very same numbers whatever batch it arrived in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from arena.models.lora import route
from arena.models.row_attention import row_spans, rows_apart
from arena.models.scoring import reply_sums
from arena.policies.base import Policy
from arena.policies.prefix_cache import PrefixCache, cached_past
from arena.policies.types import InvalidRequest, PromptLike, Scoring


@torch.inference_mode()
def continuation_logprobs(
    model: Any,
    items: Sequence[tuple[np.ndarray, Sequence[np.ndarray]]],
    *,
    temperature: float = 1.0,
    batch_size: int = 16,
    extensions: Mapping[int, Sequence[int]] | None = None,
    adapters: Sequence[str | None] | None = None,
    prefix_cache: PrefixCache | None = None,
    version: int = 0,
) -> list[list[np.ndarray]]:
    """For each (prompt ids, [continuation ids, ...]): the float32 log-probability of each
    continuation token under ``softmax(logits / temperature)``, given the prompt and the
    continuation's earlier tokens. With ``extensions``, a continuation's last token ``t`` counts
    as any of ``extensions[t]`` (the tokens that extend its text, ``t`` included): its
    log-probability is the log of their summed probability. ``adapters[i]`` names the adapter
    (:mod:`arena.models.lora`) that scores item ``i``; None: the base. With ``prefix_cache``
    (:mod:`arena.policies.prefix_cache`, holding weights ``version``), each prompt is computed
    only past its longest cached prefix, and its full blocks are kept there.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if any(len(prompt) == 0 or any(len(r) == 0 for r in replies) for prompt, replies in items):
        raise ValueError("every prompt and continuation needs at least one token")
    out: list[list[np.ndarray]] = [[] for _ in items]
    every = list(adapters) if adapters else [None] * len(items)
    for group in _groups(items, every, batch_size, prefix_cache, version):
        chunk = [items[i] for i in group]
        logits, at = _packed_logits(model, chunk, [every[i] for i in group], prefix_cache, version)
        if temperature != 1.0:
            logits = logits / temperature
        logprobs = torch.log_softmax(logits, dim=-1)
        flat = [reply for _, replies in chunk for reply in replies]
        length = max(len(reply) for reply in flat)
        reply_ids = np.zeros((len(flat), length), dtype=np.int64)
        for row, reply in enumerate(flat):
            reply_ids[row, : len(reply)] = reply
        # at[r, t]: the (prompt row, logits column) predicting token t of reply r
        rows, columns = at[..., 0], at[..., 1]
        token_ids = torch.from_numpy(reply_ids).to(logits.device)
        # just the tokens asked for (a vocabulary's row per reply token copied gigabytes)
        token_lp = logprobs[rows, columns, token_ids]
        if extensions:
            for row, reply in enumerate(flat):
                last = int(reply[-1])
                if last in extensions:
                    alternatives = torch.as_tensor(list(extensions[last]), device=logits.device)
                    where = rows[row, len(reply) - 1], columns[row, len(reply) - 1]
                    token_lp[row, len(reply) - 1] = torch.logsumexp(
                        logprobs[where][alternatives], -1
                    )
        token_lp = token_lp.cpu().numpy()
        offset = 0
        for i, (_, replies) in zip(group, chunk, strict=True):
            out[i] = [
                token_lp[offset + k, : len(reply)].astype(np.float32)
                for k, reply in enumerate(replies)
            ]
            offset += len(replies)
    return out


PADDING_SLACK = 1.25
"""A forward's padded tokens may be at most this many times its real ones: a batch's rows are
grouped by the tokens they compute, so a row that needs its whole prompt does not make a
hundred rows that read most of theirs from the prefix cache pad to its width."""


def _groups(
    items: Sequence[tuple[np.ndarray, Sequence[np.ndarray]]],
    adapters: Sequence[str | None],
    batch_size: int,
    prefix_cache: PrefixCache | None,
    version: int,
) -> list[list[int]]:
    """The items' indices in forwards of at most ``batch_size`` rows, widest rows first, each
    padding at most :data:`PADDING_SLACK` times its real tokens."""
    width = [
        len(prompt)
        - (prefix_cache.cached_tokens(prompt, adapter, version) if prefix_cache else 0)
        + sum(len(r) for r in replies)
        for (prompt, replies), adapter in zip(items, adapters, strict=True)
    ]
    groups: list[list[int]] = []
    real = 0
    for i in sorted(range(len(items)), key=lambda i: (-width[i], i)):
        group = groups[-1] if groups else []
        if (
            group
            and len(group) < batch_size
            and (len(group) + 1) * width[group[0]] <= PADDING_SLACK * (real + width[i])
        ):
            group.append(i)
            real += width[i]
        else:
            groups.append([i])
            real = width[i]
    return groups


def _packed_logits(
    model: Any,
    chunk: Sequence[tuple[np.ndarray, Sequence[np.ndarray]]],
    adapters: Sequence[str | None],
    prefix_cache: PrefixCache | None,
    version: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward of every prompt's uncached suffix with all its replies packed after it.

    Row ``i`` holds its cached prefix (:func:`~arena.policies.prefix_cache.cached_past`), then
    ``prompt[cached:] + reply_1 + reply_2 + ...`` left-padded; a 4D mask lets a reply's token see
    the prompt and its own reply's earlier tokens only, and position ids place every reply right
    after the prompt, so each reply is computed exactly as if it alone followed the prompt.
    Returns the float32 logits ``[rows, columns, vocab]`` of the columns that predict a
    reply token, and ``at`` ``[replies, longest, 2]``: the (row, column) predicting each reply
    token (the prompt's last column for token 0)."""
    device = next(model.parameters()).device
    prompts = [prompt for prompt, _ in chunk]
    held = cached_past(model, prompts, adapters, prefix_cache, version)
    rows, past = len(chunk), held.mask.shape[1]
    lengths = [
        len(p) - c + sum(len(r) for r in replies)
        for (p, replies), c in zip(chunk, held.cached, strict=True)
    ]
    width = max(lengths)
    ids = np.zeros((rows, width), dtype=np.int64)
    positions = np.zeros((rows, width), dtype=np.int64)
    group = np.full((rows, width), -2, dtype=np.int64)  # -2 padding, -1 prompt, j reply j
    # each row's columns whose logits are needed: the prompt's last, then each reply's but its last
    needed: list[list[int]] = []
    at_rows: list[list[tuple[int, int]]] = []
    for row, ((prompt, replies), cached) in enumerate(zip(chunk, held.cached, strict=True)):
        col = width - lengths[row]
        ids[row, col:] = np.concatenate([prompt[cached:], *replies])
        positions[row, col : col + len(prompt) - cached] = np.arange(cached, len(prompt))
        group[row, col : col + len(prompt) - cached] = -1
        col += len(prompt) - cached
        needed.append([col - 1])
        for j, reply in enumerate(replies):
            n = len(reply)
            positions[row, col : col + n] = np.arange(len(prompt), len(prompt) + n)
            group[row, col : col + n] = j
            first = len(needed[row])
            needed[row] += range(col, col + n - 1)
            at_rows.append([(row, 0)] + [(row, first + t) for t in range(n - 1)])
            col += n
    ids, positions, group = (torch.from_numpy(a) for a in (ids, positions, group))
    sees_new = torch.ones((width, width), dtype=torch.bool).tril()[None] & (
        (group[:, None, :] == -1) | (group[:, None, :] == group[:, :, None])
    )
    sees_new |= torch.eye(width, dtype=torch.bool)[None]  # padding sees itself: no empty row
    sees = torch.cat([held.mask.bool()[:, None, :].expand(rows, width, past), sees_new], dim=2)
    with route(model, list(adapters)), rows_apart(model):
        hidden = model.get_decoder()(
            input_ids=ids.to(device),
            attention_mask=sees[:, None].to(device),
            position_ids=positions.to(device),
            past_key_values=held.kv,
            use_cache=True,
            **row_spans(past, held.cached, width, lengths, device),
        ).last_hidden_state
        columns = max(len(n) for n in needed)
        index = np.array([n + [n[0]] * (columns - len(n)) for n in needed], dtype=np.int64)
        index = torch.from_numpy(index).to(device)
        gathered = hidden.gather(1, index[..., None].expand(-1, -1, hidden.shape[-1]))
        logits = model.get_output_embeddings()(gathered).float()
    held.store(prefix_cache, [past + width - n for n in lengths], version)
    longest = max(len(a) for a in at_rows)
    at = np.array([a + [a[0]] * (longest - len(a)) for a in at_rows], dtype=np.int64)
    return logits, torch.from_numpy(at).to(device)


def continuation_sums(
    model: Any,
    items: Sequence[tuple[np.ndarray, Sequence[np.ndarray]]],
    *,
    temperature: float = 1.0,
    batch_size: int = 16,
    extensions: Mapping[int, Sequence[int]] | None = None,
    adapters: Sequence[str | None] | None = None,
) -> list[np.ndarray]:
    """For each (prompt ids, [continuation ids, ...]): each continuation's float64 sequence
    log-probability S, the sum of its :func:`continuation_logprobs` (which says what the
    arguments do) by :func:`arena.models.scoring.reply_sums`, as the learner sums a choice
    turn's replies."""
    scored = continuation_logprobs(
        model,
        items,
        temperature=temperature,
        batch_size=batch_size,
        extensions=extensions,
        adapters=adapters,
    )
    flat = [lp for replies in scored for lp in replies]
    if not flat:
        return [np.zeros(0) for _ in scored]
    tokens = torch.from_numpy(np.concatenate(flat).astype(np.float64))
    owner = torch.repeat_interleave(torch.arange(len(flat)), torch.tensor([len(lp) for lp in flat]))
    sums = reply_sums(tokens, owner, len(flat)).numpy()
    ends = np.cumsum([len(replies) for replies in scored])
    return list(np.split(sums, ends[:-1]))


ScoreItem = tuple[np.ndarray, Sequence[np.ndarray]]
"""(prompt ids, [continuation ids, ...]): one scoring request."""


class ScoreMemo:
    """The scores of the last ``capacity`` distinct requests under one set of weights.

    The owner calls :meth:`clear` whenever its weights change (an update, a loaded adapter), so
    an entry never outlives the weights that computed it. Not thread-safe: the owner calls it
    under the lock that also guards its weights.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._scores: OrderedDict[Hashable, list[np.ndarray]] = OrderedDict()
        self.hits = 0
        """Requests answered from the memo since the owner was made."""
        self.misses = 0
        """Requests that reached the model since the owner was made."""

    def clear(self) -> None:
        self._scores.clear()

    def score(
        self,
        items: Sequence[ScoreItem],
        tags: Sequence[Hashable],
        compute: Callable[[list[int]], list[list[np.ndarray]]],
    ) -> list[list[np.ndarray]]:
        """Each item's per-token logprobs: from the memo where (item, tag) was scored, else by
        ``compute(indices)``, called once with the indices of the first occurrence of every
        request not held (a tag tells apart what else selects the weights, e.g. an adapter)."""
        keys = [
            (tag, prompt.tobytes(), tuple(np.asarray(r).tobytes() for r in replies))
            for (prompt, replies), tag in zip(items, tags, strict=True)
        ]
        missing: dict[Hashable, int] = {}
        for i, key in enumerate(keys):
            if key not in self._scores and key not in missing:
                missing[key] = i
        fresh = dict(zip(missing, compute(list(missing.values())), strict=True)) if missing else {}
        out = []
        for key in keys:
            held = fresh.get(key)
            if held is None:
                held = self._scores[key]
                self._scores.move_to_end(key)
            out.append(held)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        self._scores.update(fresh)
        while len(self._scores) > self.capacity:
            self._scores.popitem(last=False)
        return out


class RememberedScoring(Policy):
    """``score`` for a backend that computes scores itself (``hf``, ``vllm``): the requests
    checked and prepared (``Policy.prepare_scoring``), each distinct one computed once by
    :meth:`compute_scores` and remembered in :attr:`scored` for as long as the weights stay
    (the backend clears it when they change), all under the backend's lock and one version."""

    scored: ScoreMemo
    """What these weights have scored."""
    version: int
    _lock: threading.Lock

    def compute_scores(
        self, items: list[ScoreItem], adapters: list[str | None]
    ) -> list[list[np.ndarray]]:
        """The per-token logprobs of each item's continuations, item ``i`` under adapter
        ``adapters[i]``; called with the lock held."""
        raise NotImplementedError

    def score(
        self,
        prompts: Sequence[PromptLike],
        continuations: Sequence[Sequence[Any]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[Scoring]:
        if len(prompts) != len(continuations):
            raise InvalidRequest(f"{len(prompts)} prompts but {len(continuations)} continuations")
        adapters = list(adapters) if adapters is not None else [None] * len(prompts)
        if len(adapters) != len(prompts):
            raise InvalidRequest(f"{len(prompts)} prompts but {len(adapters)} adapters")
        items: list[ScoreItem] = []
        for prompt, replies, adapter in zip(prompts, continuations, adapters, strict=True):
            ready, ids = self.prepare_scoring(prompt, replies, adapter)
            assert ready.ids is not None
            items.append((ready.ids, ids))

        def compute(indices: list[int]) -> list[list[np.ndarray]]:
            return self.compute_scores([items[i] for i in indices], [adapters[i] for i in indices])

        with self._lock:
            version = self.version
            scored = self.scored.score(items, adapters, compute)
        return [
            Scoring(prompt_ids=prompt_ids, logprobs=logprobs, version=version)
            for (prompt_ids, _), logprobs in zip(items, scored, strict=True)
        ]
