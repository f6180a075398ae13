"""Weights on the bus: a state dict cut into buckets, each with a version and a checksum.

The learner publishes a new policy version as ``weights`` messages, one per bucket; each
tensor's bytes travel as their own zero-copy frame (never one message per parameter, never a
msgpack list). A bucket body is::

    {"version": 7, "bucket": 0, "num_buckets": 9, "checksum": crc32 of the tensor bytes,
     "tensors": [{"name": "model.embed_tokens.weight", "dtype": "float32",
                  "shape": [49152, 576], "data": <uint8 ndarray>}, ...]}

The receiver's :class:`WeightAssembler` checks every bucket (names, shapes, dtypes, checksum)
against the model it serves and yields the full update only when every bucket of one version has
arrived. A partial update (a missing bucket: a newer version starts, or it times out) or a
corrupt one is rejected with a reason and the old weights keep serving.
"""

from __future__ import annotations

import logging
import time
import warnings
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

log = logging.getLogger("arena.weights")

DEFAULT_BUCKET_BYTES = 64 << 20

_TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8,
    "int8": torch.int8, "bool": torch.bool,
}  # fmt: skip


_FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})


class WeightUpdateError(ValueError):
    """A weights bucket or update that must not be applied; the message says why."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor_bytes(tensor: torch.Tensor) -> np.ndarray:
    """A uint8 view of a CPU tensor's memory (bfloat16 included, which numpy cannot hold)."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy()


def frame_tensor(data: np.ndarray, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor viewing a received frame's bytes, without a copy.

    Frames are read-only buffers and torch warns about that; the update is only ever read
    (copied into the model), so the warning is silenced rather than paid for with a copy of
    every tensor (for a 135M fp32 model, 540 MB of fresh memory per update).
    """
    if not data.nbytes:
        return torch.empty(shape, dtype=dtype)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(data, dtype=dtype).reshape(shape)


def make_buckets(
    state: Mapping[str, torch.Tensor], version: int, bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> Iterator[dict[str, Any]]:
    """Yield bucket bodies for ``state``; a tensor larger than ``bucket_bytes`` gets its own."""
    groups: list[list[tuple[str, torch.Tensor]]] = [[]]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if groups[-1] and size + nbytes > bucket_bytes:
            groups.append([])
            size = 0
        groups[-1].append((name, tensor))
        size += nbytes
    for index, group in enumerate(groups):
        tensors = []
        checksum = 0
        for name, tensor in group:
            data = tensor_bytes(tensor)
            checksum = zlib.crc32(data, checksum)
            tensors.append({"name": name, "dtype": dtype_name(tensor.dtype),
                            "shape": list(tensor.shape), "data": data})  # fmt: skip
        yield {"version": version, "bucket": index, "num_buckets": len(groups),
               "checksum": checksum, "tensors": tensors}  # fmt: skip


@dataclass
class _Partial:
    version: int
    num_buckets: int
    started: float
    buckets: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)


class WeightAssembler:
    """Collects buckets into a complete, validated update for a model of known parameters."""

    def __init__(self, expected: Mapping[str, torch.Tensor], timeout: float = 120.0) -> None:
        self.expected = {name: (tuple(t.shape), dtype_name(t.dtype)) for name, t in expected.items()}
        self.timeout = timeout
        self.counters: Counter[str] = Counter()
        self.last_version = -1
        self._partial: _Partial | None = None

    def add(self, body: Any) -> tuple[int, dict[str, torch.Tensor]] | None:
        """Take one bucket; return ``(version, state)`` once the update is complete.

        Raises :class:`WeightUpdateError` for a corrupt bucket, which also drops the update
        it belonged to.
        """
        try:
            version, index, total, tensors = self._check_bucket(body)
        except WeightUpdateError as err:
            self._drop(f"corrupt bucket: {err}")
            raise
        partial = self._partial
        if partial is not None and (partial.version != version or self._expired(partial)):
            self._drop(f"update {partial.version} incomplete: "
                       f"{len(partial.buckets)}/{partial.num_buckets} buckets arrived")  # fmt: skip
            partial = None
        if partial is None:
            partial = self._partial = _Partial(version, total, time.monotonic())
        if total != partial.num_buckets:
            self._drop("buckets disagree on num_buckets")
            raise WeightUpdateError(f"bucket {index} says {total} buckets, update has {partial.num_buckets}")
        partial.buckets[index] = tensors
        if len(partial.buckets) < partial.num_buckets:
            return None
        self._partial = None
        state = {name: t for bucket in partial.buckets.values() for name, t in bucket.items()}
        missing = set(self.expected) - set(state)
        if missing:
            self.counters["rejected"] += 1
            raise WeightUpdateError(f"update {version} lacks {len(missing)} tensors, e.g. {sorted(missing)[0]}")
        self.last_version = version
        self.counters["applied"] += 1
        return version, state

    def _check_bucket(self, body: Any) -> tuple[int, int, int, dict[str, torch.Tensor]]:
        if not isinstance(body, dict):
            raise WeightUpdateError("bucket must be a map")
        try:
            version, index, total = int(body["version"]), int(body["bucket"]), int(body["num_buckets"])
            checksum, entries = int(body["checksum"]), body["tensors"]
        except (KeyError, TypeError, ValueError) as err:
            raise WeightUpdateError(f"bucket lacks or garbles field {err}") from None
        if version <= self.last_version:
            raise WeightUpdateError(f"version {version} is not newer than {self.last_version}")
        if not 0 <= index < total:
            raise WeightUpdateError(f"bucket index {index} outside 0..{total - 1}")
        crc = 0
        tensors: dict[str, torch.Tensor] = {}
        for entry in entries:
            name, data = entry.get("name"), entry.get("data")
            if name not in self.expected:
                raise WeightUpdateError(f"unknown tensor {name!r}")
            shape, dtype = self.expected[name]
            sent = entry.get("dtype")
            # A float32 learner may feed a bfloat16 server: floats are cast on receipt. Any
            # other dtype change, or any shape change, is a corrupt update.
            castable = sent in _FLOAT_DTYPES and dtype in _FLOAT_DTYPES
            if tuple(entry.get("shape", ())) != shape or (sent != dtype and not castable):
                raise WeightUpdateError(
                    f"{name}: got {sent}{entry.get('shape')}, model has {dtype}{list(shape)}"
                )
            if not isinstance(data, np.ndarray) or data.dtype != np.uint8:
                raise WeightUpdateError(f"{name}: data must be a uint8 frame")
            torch_dtype = _TORCH_DTYPES[sent]
            if data.nbytes != int(np.prod(shape)) * torch.empty((), dtype=torch_dtype).element_size():
                raise WeightUpdateError(f"{name}: {data.nbytes} bytes do not fit {sent}{list(shape)}")
            crc = zlib.crc32(data, crc)
            tensor = frame_tensor(data, torch_dtype, shape)
            tensors[name] = tensor if sent == dtype else tensor.to(_TORCH_DTYPES[dtype])
        if crc != checksum:
            raise WeightUpdateError(f"checksum mismatch in bucket {index} of version {version}")
        return version, index, total, tensors

    def _expired(self, partial: _Partial) -> bool:
        return time.monotonic() - partial.started > self.timeout

    def _drop(self, reason: str) -> None:
        if self._partial is not None or reason.startswith("corrupt"):
            self.counters["rejected"] += 1
            log.warning("weight update rejected, old weights keep serving: %s", reason)
        self._partial = None
