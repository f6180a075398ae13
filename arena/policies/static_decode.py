"""Decoding with a preallocated (static) KV cache, no host synchronisation per token, and on
CUDA one CUDA graph per batch shape: the HF backend's fast path (``static_decode``).

The loop path of :mod:`arena.policies.hf` pays, per token, a Python step per row, a host sync
(the sampled ids are read to decide who stopped) and a cache that grows by ``torch.cat``; on a
GPU the kernels of a 135M model are shorter than that overhead, so the GPU mostly waits. Here:

- The batch is padded to a bucket of :data:`BUCKETS` rows, and the cache to a power of two
  (at least :data:`COLUMNS`) columns, so that one shape, and one captured graph, serves many batches. The
  prefill (:func:`arena.policies.prefix_cache.prefill`, prefix cache included) is copied into a
  transformers ``StaticCache``; each step writes its column in place.
- A step is pure device work: the attention mask, position ids, the LoRA routing (float masks,
  :func:`arena.models.lora.route_masks`), sampling (:func:`~arena.policies.sampling.
  inverse_cdf` over uniforms drawn before decoding starts) and the writes of the sampled token
  and its logprob all read and write fixed device tensors. On CUDA the step is captured once
  per shape as a ``torch.cuda.CUDAGraph`` and replayed (:data:`MAX_SHAPES` shapes kept).
- Every ``check_every`` tokens (and at the end) the new tokens go to the host at once and each
  row's stop criteria run there, through the loop path's own ``record`` (its stop ids, stop
  strings and token budget): the same finish as the loop path, token for token. Rows that
  finished keep decoding, unread, until every row has.

Same results as the loop path: a seeded request draws its ``k``-th uniform from its own
generator exactly as the loop does (``torch.rand(n)`` on a CPU generator yields the same
doubles as ``n`` scalar draws), so it samples the same tokens, with the same tempered logprobs
up to kernel summation order (tests/arena/policies/test_static_decode.py). Requests without a
seed draw their uniforms from the policy's shared generator row after row rather than step
after step: equally random, not the same draws as the loop path's.

On CPU this path decodes no faster than the loop (bench/gpu_check.py measures both), so
``static_decode: auto`` uses it on CUDA only.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from transformers import StaticCache

from arena.models.lora import route_masks
from arena.policies.prefix_cache import Prefill, usable
from arena.policies.sampling import inverse_cdf, truncated_probs
from arena.policies.types import SamplingParams

log = logging.getLogger(__name__)

MODES = ("auto", "on", "off")
ATTENTION = ("eager", "sdpa")
"""Attention kernels that take the additive ``[rows, 1, 1, columns]`` mask a step passes."""
BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""Batch sizes a batch is padded up to (a larger batch takes the next multiple of 1024)."""
COLUMNS = 128
"""Cache lengths are rounded up to a power of two, at least this many columns: few shapes (so
few captures) for prompts of any length, at most twice the columns attended to."""
MAX_SHAPES = 16
"""Shapes (rows, columns, adapters, truncation, dtype) whose buffers and graph are kept, LRU: enough
for every batch bucket a live inference actor meets at one or two cache lengths, so that it
does not capture again and again. The largest dominate memory: 256 rows x 512 columns of a bf16
SmolLM2-135M cache are 3 GB."""
CHECK_EVERY = {"cuda": 16, "cpu": 1}
"""Tokens between host-side stop checks, by device type (elsewhere: the CUDA value). On CPU a
check costs no sync, and checking every token stops as soon as the last row does."""


class Row(Protocol):
    """What the decoder reads of a request (``arena.policies.hf._Row``)."""

    prompt_ids: np.ndarray
    params: SamplingParams
    budget: int


Record = Callable[[Any, int, float], bool]
"""The loop path's step: record a row's token and logprob, return whether it finished."""


def wanted(mode: str, model: Any, device: torch.device) -> bool:
    """Whether to decode ``model`` on ``device`` with this path under setting ``mode``."""
    if mode not in MODES:
        raise ValueError(f"static_decode: {mode!r} is not one of {', '.join(MODES)}")
    if mode == "off":
        return False
    attention = model.config._attn_implementation
    why = (
        "the model has sliding-window layers"
        if not usable(model)
        else f"its attention kernel {attention!r} takes no additive mask"
        if attention not in ATTENTION
        else ""
    )
    if why:
        if mode == "on":
            raise ValueError(f"static_decode: on, but {why} (off, or attention: sdpa)")
        return False
    return mode == "on" or device.type == "cuda"


def bucket(rows: int) -> int:
    """The padded batch size of ``rows`` requests."""
    return next((b for b in BUCKETS if b >= rows), -(-rows // BUCKETS[-1]) * BUCKETS[-1])


def columns(tokens: int) -> int:
    """The cache length that holds ``tokens``."""
    return max(COLUMNS, 1 << (tokens - 1).bit_length())


class StaticDecoder:
    """Decodes batches of one model; holds the device buffers (and graphs) of recent shapes."""

    def __init__(self, model: Any, *, graphs: bool | None = None) -> None:
        """``graphs``: capture CUDA graphs (default: on a CUDA device)."""
        self.model = model
        self.device = next(model.parameters()).device
        self.graphs = self.device.type == "cuda" if graphs is None else graphs
        self.check_every = CHECK_EVERY.get(self.device.type, CHECK_EVERY["cuda"])
        self._shapes: OrderedDict[tuple, _Shape] = OrderedDict()
        self.captured = 0
        """Graphs captured so far (a capture that failed falls back to eager steps, logged)."""
        self.steps = 0
        """Decoding steps run (each one token for every row of a bucket)."""

    @torch.inference_mode()
    def decode(
        self,
        rows: Sequence[Row],
        done: Prefill,
        adapters: Sequence[str | None],
        generator: torch.Generator,
        record: Record,
    ) -> None:
        """Decode ``rows`` from their prefill ``done`` (row ``i`` through ``adapters[i]``),
        handing each token to ``record`` in order until it says the row finished."""
        params = [r.params for r in rows]
        steps = max(max(r.budget for r in rows), 1)
        width = done.mask.shape[1]
        key = (
            bucket(len(rows)),
            columns(width + steps),
            tuple(sorted({a for a in adapters if a is not None})),
            any(p.top_k > 0 or p.top_p < 1 for p in params if not p.greedy),
            # what the attention layers compute in: the model's dtype, or float32 where a
            # half-precision model holds adapters (their layers return float32, so its keys,
            # values and queries are float32: arena.models.lora.LoRALinear)
            done.kv.layers[0].keys.dtype,
        )
        shape = self._shape(key)
        shape.load(rows, done, adapters, generator, steps)
        shape.sample(_padded(done.logits, shape.rows))
        finished = [False] * len(rows)
        read = 0
        step = 1
        while True:
            if step == steps or step % self.check_every == 0:
                read = self._check(shape, rows, finished, read, step, record)
                if all(finished):
                    return
            shape.run(self.model)
            self.steps += 1
            step += 1

    def _check(
        self,
        shape: _Shape,
        rows: Sequence[Row],
        finished: list[bool],
        read: int,
        upto: int,
        record: Record,
    ) -> int:
        """Hand tokens ``read..upto-1`` of every unfinished row to ``record``; one transfer."""
        tokens = shape.tokens[: len(rows), read:upto].cpu().numpy()
        logprobs = shape.logprobs[: len(rows), read:upto].cpu().numpy()
        for i, row in enumerate(rows):
            for j in range(upto - read):
                if finished[i]:
                    break
                finished[i] = record(row, int(tokens[i, j]), float(logprobs[i, j]))
        return upto

    def _shape(self, key: tuple) -> _Shape:
        shape = self._shapes.get(key)
        if shape is None:
            while len(self._shapes) >= MAX_SHAPES:
                self._shapes.popitem(last=False)
            shape = _Shape(self.model, *key)
            if self.graphs:
                self.captured += shape.capture(self.model)
            self._shapes[key] = shape
        self._shapes.move_to_end(key)
        return shape


class _Shape:
    """The fixed device tensors one step reads and writes, for one batch shape."""

    def __init__(
        self,
        model: Any,
        rows: int,
        columns: int,
        adapters: tuple[str, ...],
        truncate: bool,
        dtype: torch.dtype,
    ) -> None:
        """``dtype``: the prefill's keys' (so the queries', values' and the cache's): the
        additive mask must match the queries for sdpa, and the cache the keys it is written."""
        config = model.config
        device = next(model.parameters()).device
        self.dtype = dtype
        self.rows, self.columns, self.truncate = rows, columns, truncate
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = (
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        self.cache = StaticCache(config=config, max_cache_len=columns)
        self.cache.early_initialization(rows, heads, head_dim, self.dtype, device)
        zeros = {"device": device, "dtype": torch.long}
        self.allowed = torch.zeros((rows, columns), dtype=torch.bool, device=device)
        self.column = torch.zeros(1, **zeros)
        self.position = torch.zeros((rows, 1), **zeros)
        self.token = torch.zeros(rows, **zeros)
        self.step = torch.zeros(1, **zeros)
        self.uniform = torch.zeros((rows, columns), dtype=torch.float64, device=device)
        self.temperature = torch.ones(rows, device=device)
        self.greedy = torch.ones(rows, dtype=torch.bool, device=device)
        self.top_k = torch.zeros(rows, **zeros)
        self.top_p = torch.ones(rows, device=device)
        self.tokens = torch.zeros((rows, columns), **zeros)
        self.logprobs = torch.zeros((rows, columns), device=device)
        self.masks = {a: torch.zeros(rows, device=device) for a in adapters}
        self.graph: torch.cuda.CUDAGraph | None = None

    def load(
        self,
        rows: Sequence[Row],
        done: Prefill,
        adapters: Sequence[str | None],
        generator: torch.Generator,
        steps: int,
    ) -> None:
        """Copy one batch's prefill, params and pre-drawn uniforms into the buffers."""
        n, width = done.mask.shape
        for layer, source in zip(self.cache.layers, done.kv.layers, strict=True):
            layer.keys[:n, :, :width].copy_(source.keys)
            layer.values[:n, :, :width].copy_(source.values)
            layer.cumulative_length.fill_(width)
        self.allowed.zero_()
        self.allowed[:n, :width].copy_(done.mask.bool())
        self.allowed[n:, 0] = True  # padding rows attend to one (zero) column: no NaN
        self.column.fill_(width)
        self.position.zero_()
        self.position[:n].copy_(done.last_position)
        self.step.zero_()
        params = [r.params for r in rows]
        host = torch.zeros((self.rows, self.columns), dtype=torch.float64)
        for i, p in enumerate(params):
            if not p.greedy:
                own = torch.Generator().manual_seed(p.seed) if p.seed is not None else generator
                host[i, :steps] = torch.rand(steps, generator=own, dtype=torch.float64)
        self.uniform.copy_(host)
        pad = self.rows - n
        self.temperature.copy_(
            _tensor([p.temperature if not p.greedy else 1.0 for p in params], pad, 1.0)
        )
        self.greedy.copy_(_tensor([p.greedy for p in params], pad, True))
        self.top_k.copy_(_tensor([p.top_k for p in params], pad, 0))
        self.top_p.copy_(_tensor([p.top_p for p in params], pad, 1.0))
        for name, mask in self.masks.items():
            mask.copy_(_tensor([float(a == name) for a in adapters], pad, 0.0))

    def sample(self, logits: torch.Tensor) -> None:
        """Sample this step's token of every row from ``logits`` ``[rows, vocab]``; record it
        and its logprob under ``log_softmax(logits / T)`` (as :class:`BatchSampler`)."""
        logits = logits.float()
        best = logits.argmax(dim=-1)
        logits = logits / self.temperature[:, None]
        if self.truncate:
            probs = truncated_probs(logits, self.top_k, self.top_p)
        else:
            probs = logits.softmax(dim=-1)
        drawn = inverse_cdf(probs, self.uniform.index_select(1, self.step).squeeze(1))
        token = torch.where(self.greedy, best, drawn)
        chosen = logits.gather(1, token[:, None]).squeeze(1)
        logprob = chosen - torch.logsumexp(logits, dim=-1)
        self.tokens.index_copy_(1, self.step, token[:, None])
        self.logprobs.index_copy_(1, self.step, logprob[:, None])
        self.token.copy_(token)
        self.step.add_(1)

    def forward(self, model: Any) -> None:
        """One step: feed each row's last token at its next position, sample the next."""
        self.position.add_(1)
        self.allowed.index_fill_(1, self.column, True)
        bias = torch.zeros(self.allowed.shape, dtype=self.dtype, device=self.allowed.device)
        bias = bias.masked_fill(~self.allowed, torch.finfo(self.dtype).min)[:, None, None, :]
        with route_masks(model, self.masks):
            logits = model(
                input_ids=self.token[:, None],
                attention_mask=bias,
                position_ids=self.position,
                past_key_values=self.cache,
                use_cache=True,
                logits_to_keep=1,
            ).logits[:, -1]
        self.column.add_(1)
        self.sample(logits)

    def run(self, model: Any) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.forward(model)

    def capture(self, model: Any) -> bool:
        """Capture :meth:`forward` as a CUDA graph (after warm-up steps on a side stream, which
        scribble on the buffers; :meth:`load` resets them). False, logged, if capture fails."""
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._rewind()
                    self.forward(model)
            torch.cuda.current_stream().wait_stream(stream)
            self._rewind()
            graph = torch.cuda.CUDAGraph()
            # thread_local: the inference actor's event loop thread may touch CUDA meanwhile
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.forward(model)
        except Exception as error:  # noqa: BLE001 - any failure leaves eager steps, which work
            log.warning("CUDA graph capture failed, decoding %s eagerly: %s", self.key(), error)
            return False
        self.graph = graph
        return True

    def _rewind(self) -> None:
        self.column.zero_()
        self.step.zero_()
        for layer in self.cache.layers:
            layer.cumulative_length.zero_()

    def key(self) -> str:
        return f"{self.rows} rows x {self.columns} columns"


def _tensor(values: list, pad: int, fill: Any) -> torch.Tensor:
    return torch.tensor(values + [fill] * pad)


def _padded(logits: torch.Tensor, rows: int) -> torch.Tensor:
    if logits.shape[0] == rows:
        return logits
    return torch.cat([logits, logits.new_zeros((rows - logits.shape[0], logits.shape[1]))])
