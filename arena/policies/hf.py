"""The Hugging Face transformers backend: batched sampling with left padding and a KV cache.

One decoding loop serves a whole batch whose requests may differ in prompt length and sampling
params. Prompts are left-padded so every row's next token sits in the last column; position ids
follow each row's own mask. A row that finishes (end-of-turn token, stop string, token budget)
is dropped from the batch and its cache, so long requests do not make short ones pay. A
prompt is computed only past the longest prefix whose KV blocks the current weights already
hold (:mod:`arena.policies.prefix_cache`), for generation and scoring alike. With
``static_decode`` (on CUDA by default) the decoding after the prefill runs in
:mod:`arena.policies.static_decode` instead: a static KV cache, one CUDA graph per batch shape,
no host sync per token, and the same finish rules (this module's :meth:`HFPolicy._step`).

Works on CPU and GPU, in any dtype; logprobs are computed in float32, under the request's
tempered but untruncated distribution ``log_softmax(logits / T)`` (T = 1 for greedy requests),
which is what a learner with ``loss.temperature = T`` recomputes (see
:mod:`arena.policies.sampling`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from arena.models import load_model
from arena.models.adapter_shape import AdapterError, AdapterShape
from arena.models.lora import (
    adapter_buffers,
    adapter_names,
    adapter_state,
    add_adapters,
    load_adapter_state,
    route,
)
from arena.models.lora_files import read_adapter
from arena.policies.chat import ChatFormat
from arena.policies.prefix_cache import PrefixCache, prefill, usable
from arena.policies.sampling import BatchSampler
from arena.policies.scoring import (
    RememberedScoring,
    ScoreItem,
    ScoreMemo,
    continuation_logprobs,
)
from arena.policies.static_decode import StaticDecoder, wanted
from arena.policies.types import (
    Generation,
    PromptLike,
    SamplingParams,
    per_request,
)

if TYPE_CHECKING:
    from arena.policies.config import PolicyConfig


@dataclass
class _Row:
    """One request's progress through the decoding loop."""

    prompt_ids: np.ndarray
    params: SamplingParams
    budget: int
    stop_ids: frozenset[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = ""
    stop_at: int = -1
    """Where a matched stop string starts in the decoded text, or -1."""


class HFPolicy(RememberedScoring):
    """A transformers causal LM as a :class:`Policy`."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        name: str = "main",
        version: int = 0,
        max_batch: int = 64,
        seed: int = 0,
        attention: str = "auto",
        prefix_cache_mb: float = 512,
        static_decode: str = "auto",
    ) -> None:
        """``attention`` sets the model's attention kernel (a transformers
        ``attn_implementation``). ``auto`` picks ``eager`` on CPU, where it decodes a batch of 32
        short bf16 contexts ~1.25x faster than ``sdpa`` (measured on SmolLM2-135M), and keeps
        the model's own kernel elsewhere. ``prefix_cache_mb`` bounds the KV blocks of prompt
        prefixes kept for the current weights (:mod:`arena.policies.prefix_cache`); 0: none.
        ``static_decode`` (auto, on, off) picks the decoding loop: a static KV cache, CUDA graphs
        and no host sync per token (:mod:`arena.policies.static_decode`), or the loop below;
        ``auto`` is the static one on CUDA only."""
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.chat = ChatFormat(tokenizer)
        self.name = name
        self.version = version
        self.max_batch = max_batch
        self.device = next(model.parameters()).device
        if attention == "auto":
            attention = "eager" if self.device.type == "cpu" else model.config._attn_implementation
        if attention != model.config._attn_implementation:
            model.set_attn_implementation(attention)
        # Sampling draws one CPU random number per row, whatever the model's device.
        self.generator = torch.Generator().manual_seed(seed)
        self.max_context: int = int(getattr(model.config, "max_position_embeddings", 2048))
        self.pad_id = next(
            i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None
        )
        self.eos_ids = frozenset(_eos_ids(model, tokenizer))
        # Generation and weight loading must never interleave: a batch sees one version.
        self._lock = threading.Lock()
        self.scored = ScoreMemo()
        """What the current weights have scored (cleared whenever a weight changes)."""
        self.weights = 0
        """Bumped at every weight change, adapter loads included (which leave :attr:`version`
        as it is): the version the prefix cache's blocks carry."""
        self.prefix_cache = (
            PrefixCache(int(prefix_cache_mb * 2**20))
            if prefix_cache_mb > 0 and usable(model)
            else None
        )
        """Prompt prefixes' KV blocks under the current weights (None: off)."""
        self.static = StaticDecoder(model) if wanted(static_decode, model, self.device) else None
        """The static-cache decoder, or None: the per-token loop of :meth:`_decode`."""
        self.default_adapter: str | None = None
        """The adapter a request naming none plays (:meth:`serve_by_default`); None: the base."""

    @classmethod
    def from_config(cls, config: PolicyConfig) -> HFPolicy:
        model, tokenizer = load_model(config.model, dtype=config.dtype, device=config.device)
        policy = cls(
            model,
            tokenizer,
            name=config.name,
            max_batch=config.max_batch,
            seed=config.seed,
            attention=config.attention,
            prefix_cache_mb=config.prefix_cache_mb,
            static_decode=config.static_decode,
        )
        for adapter, path in config.adapters.items():
            policy.load_adapter(adapter, path, base=config.model)
        if config.default_adapter:
            policy.serve_by_default(config.default_adapter)
        return policy

    # -- Policy ------------------------------------------------------------------------------
    def generate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        all_params = per_request(params, len(prompts))
        rows = [self._row(p, sp) for p, sp in zip(prompts, all_params, strict=True)]
        with self._lock:
            version = self.version
            for start in range(0, len(rows), self.max_batch):
                self._decode(rows[start : start + self.max_batch])
        return [self._result(row, version) for row in rows]

    def compute_scores(
        self, items: list[ScoreItem], adapters: list[str | None]
    ) -> list[list[np.ndarray]]:
        """Each prompt's KV cache computed once serves all its continuations
        (:func:`~arena.policies.scoring.continuation_logprobs`); prompts of different adapters
        share the batch. :meth:`score` (:class:`RememberedScoring`) calls this for the
        requests these weights have not scored yet."""
        return continuation_logprobs(
            self.model,
            items,
            batch_size=self.max_batch,
            adapters=self._routed(adapters),
            prefix_cache=self.prefix_cache,
            version=self.weights,
        )

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """What a weight update carries: every weight, or, while the policy serves adapters,
        one buffer per adapter and nothing of the frozen base (trainers/adapters.py)."""
        if self.adapters():
            return adapter_buffers(self.model)
        return self.model.state_dict()

    def separable_weights(self) -> frozenset[str]:
        """Each adapter's buffer stands alone: an update may carry only the adapters that
        changed. The full model's tensors do not."""
        return frozenset(adapter_buffers(self.model)) if self.adapters() else frozenset()

    # -- adapters ----------------------------------------------------------------------------
    def adapters(self) -> tuple[str, ...]:
        return tuple(adapter_names(self.model))

    def load_adapter(
        self,
        name: str,
        source: str | Mapping[str, torch.Tensor],
        *,
        base: str | None = None,
        shape: AdapterShape | None = None,
    ) -> None:
        """Serve adapter ``name``: from a peft directory made for ``base`` (refused for another
        base), or from its tensors (peft names, ``shape`` needed the first time). Loading a
        name the policy serves replaces its weights, between batches."""
        if isinstance(source, str):
            if base is None:
                raise ValueError("loading an adapter directory needs the served base's name")
            shape, state = read_adapter(source, base)
        else:
            state = dict(source)
        with self._lock:
            if name not in adapter_names(self.model):
                add_adapters(self.model, [name], shape or AdapterShape())
            load_adapter_state(self.model, name, state)
            self._weights_changed()

    def serve_by_default(self, name: str) -> None:
        """Play adapter ``name`` for every request that names no adapter: a shared policy's
        LoRA (``learner.lora.serve: adapter``), served unmerged on the frozen base."""
        if name not in self.adapters():
            raise AdapterError(
                f"default adapter {name!r} is not served; held: {', '.join(self.adapters())}"
            )
        with self._lock:
            self.default_adapter = name
            self.scored.clear()

    def _routed(self, adapters: Sequence[str | None]) -> list[str | None]:
        return [a or self.default_adapter for a in adapters]

    def adapter_state(self, name: str) -> dict[str, torch.Tensor]:
        """CPU copies of a served adapter's tensors (peft names)."""
        return adapter_state(self.model, name)

    @torch.no_grad()
    def update_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        current = self.state_dict()
        unknown = set(state) - set(current)
        if unknown:
            raise KeyError(f"update names tensors the model lacks, e.g. {sorted(unknown)[0]}")
        with self._lock:
            for name, tensor in state.items():
                current[name].copy_(tensor)
            self.version = version
            self._weights_changed()

    def _weights_changed(self) -> None:
        """Forget everything the old weights computed; called with the lock held."""
        self.scored.clear()
        self.weights += 1
        if self.prefix_cache is not None:
            self.prefix_cache.reset(self.weights)

    # -- decoding ----------------------------------------------------------------------------
    def _row(self, prompt: PromptLike, params: SamplingParams) -> _Row:
        ids = self.prepare(prompt, params).ids
        assert ids is not None
        budget = min(params.max_new_tokens, self.max_context - len(ids))
        return _Row(ids, params, budget, self.eos_ids | set(params.stop_token_ids))

    @torch.inference_mode()
    def _decode(self, rows: list[_Row]) -> None:
        """Decode a batch: the prompts prefilled past their cached prefixes, then a token a
        step for every row still going."""
        done = prefill(
            self.model,
            [r.prompt_ids for r in rows],
            self._routed([r.params.adapter for r in rows]),
            self.prefix_cache,
            self.weights,
        )
        if self.static is not None:
            adapters = self._routed([r.params.adapter for r in rows])
            self.static.decode(rows, done, adapters, self.generator, self._step)
            return
        logits, cache, mask, positions = done.logits, done.kv, done.mask, done.last_position
        sampler = BatchSampler([r.params for r in rows], self.generator)
        active = list(range(len(rows)))
        while True:
            tokens, logprobs = sampler(logits)
            keep = [
                j
                for j, i in enumerate(active)
                if not self._step(rows[i], int(tokens[j]), float(logprobs[j]))
            ]
            if not keep:
                return
            if len(keep) < len(active):
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                sampler.select(index)
                tokens, mask, positions = tokens[index], mask[index], positions[index]
                active = [active[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            positions = positions + 1
            with route(self.model, self._routed([rows[i].params.adapter for i in active])):
                logits = self.model(
                    input_ids=tokens[:, None],
                    attention_mask=mask,
                    position_ids=positions,
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=1,
                ).logits[:, -1]

    def _step(self, row: _Row, token: int, logprob: float) -> bool:
        """Record one sampled token; return whether the row is finished."""
        row.tokens.append(token)
        row.logprobs.append(logprob)
        if token in row.stop_ids or (row.params.stop and self._find_stop(row)):
            row.finish_reason = "stop"
        elif len(row.tokens) >= row.budget:
            row.finish_reason = "length"
        return bool(row.finish_reason)

    def _find_stop(self, row: _Row) -> bool:
        text = self.tokenizer.decode(row.tokens, skip_special_tokens=True)
        hits = [i for i in (text.find(s) for s in row.params.stop) if i >= 0]
        row.stop_at = min(hits, default=-1)
        return row.stop_at >= 0

    def _result(self, row: _Row, version: int) -> Generation:
        text = self.tokenizer.decode(row.tokens, skip_special_tokens=True)
        if row.stop_at >= 0:
            text = text[: row.stop_at]
        return Generation(
            prompt_ids=row.prompt_ids,
            token_ids=np.asarray(row.tokens, dtype=np.int32),
            logprobs=np.asarray(row.logprobs, dtype=np.float32),
            text=text,
            finish_reason=row.finish_reason,
            version=version,
        )


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """End-of-turn ids: the tokenizer's eos plus the generation config's (one id or a list)."""
    ids: set[int] = set()
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (tokenizer.eos_token_id, config_eos):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return ids
