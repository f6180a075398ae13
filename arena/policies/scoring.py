"""Scoring continuations of a prompt by teacher forcing, the prompt computed once.

:func:`continuation_logprobs` is the one implementation behind :meth:`HFPolicy.score
<arena.policies.hf.HFPolicy.score>` (a seat choosing among its legal replies) and the exact
policy reader (:mod:`arena.eval.policy_reader`, through :func:`continuation_sums`). A batch of prompts, left-padded, fills a KV
cache in one forward pass; the cache is then repeated for each of a prompt's continuations, and
the continuations, right-padded, run on top of it. A prompt is usually far longer than its
continuations, so N replies cost about one forward pass of the prompt rather than N, and only the
continuation columns' logits are computed. Given a
:class:`~arena.policies.prefix_cache.PrefixCache`, a prompt is computed only past the longest
prefix an earlier request of the same weights and adapter left there; all the prompts of one call
(one inference batch) still go through one forward, and all their continuations through another.

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
from arena.models.scoring import reply_sums
from arena.policies.base import Policy
from arena.policies.prefix_cache import PrefixCache, prefill
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
    device = next(model.parameters()).device
    out: list[list[np.ndarray]] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        chunk_adapters = list(adapters[start : start + batch_size]) if adapters else []
        done = prefill(
            model,
            [prompt for prompt, _ in chunk],
            chunk_adapters or [None] * len(chunk),
            prefix_cache,
            version,
        )
        first, cache, mask = done.logits, done.kv, done.mask
        # one row per (prompt, continuation): the prompt's cache, then the continuation
        owner = [row for row, (_, replies) in enumerate(chunk) for _ in replies]
        flat = [reply for _, replies in chunk for reply in replies]
        index = torch.tensor(owner, dtype=torch.long)
        cache.batch_select_indices(index.to(device))
        mask = mask[index.to(device)]
        length = max(len(reply) for reply in flat)
        reply_ids = torch.zeros((len(flat), length), dtype=torch.long)
        reply_mask = torch.zeros((len(flat), length), dtype=torch.long)
        for row, reply in enumerate(flat):
            reply_ids[row, : len(reply)] = torch.as_tensor(reply, dtype=torch.long)
            reply_mask[row, : len(reply)] = 1
        after = done.last_position[index.to(device)] + 1 + torch.arange(length, device=device)
        with route(model, [chunk_adapters[row] for row in owner] if chunk_adapters else []):
            rest = model(
                input_ids=reply_ids.to(device),
                attention_mask=torch.cat([mask, reply_mask.to(device)], dim=1),
                position_ids=after,
                past_key_values=cache,
                use_cache=True,
            ).logits
        # token t is predicted by the prompt's last logits (t = 0) or continuation column t - 1
        logits = torch.cat([first[index.to(device)][:, None], rest[:, :-1]], dim=1).float()
        if temperature != 1.0:
            logits = logits / temperature
        logprobs = torch.log_softmax(logits, dim=-1)
        token_lp = logprobs.gather(-1, reply_ids.to(device)[..., None])[..., 0]
        if extensions:
            for row, reply in enumerate(flat):
                last = int(reply[-1])
                if last in extensions:
                    alternatives = torch.as_tensor(list(extensions[last]), device=device)
                    at = len(reply) - 1
                    token_lp[row, at] = torch.logsumexp(logprobs[row, at, alternatives], -1)
        token_lp = token_lp.cpu().numpy()
        offset = 0
        for _, replies in chunk:
            out.append(
                [
                    token_lp[offset + i, : len(reply)].astype(np.float32)
                    for i, reply in enumerate(replies)
                ]
            )
            offset += len(replies)
    return out


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
