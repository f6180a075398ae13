"""Weights on the bus: a state dict cut into buckets, each with a version and a checksum.

The learner publishes a new policy version as ``weights`` messages, one per bucket (never one
message per parameter, never a msgpack list). A bucket carries its tensors in one of two forms.

**Bytes** (:func:`make_buckets`): each tensor's bytes travel as their own zero-copy frame::

    {"version": 7, "bucket": 0, "num_buckets": 9, "checksum": crc32 of the tensor bytes,
     "tensors": [{"name": "model.embed_tokens.weight", "dtype": "float32",
                  "shape": [49152, 576], "data": <uint8 ndarray>}, ...]}

**Same-host reference** (:mod:`arena.weights.shm`): the publisher wrote the whole version once
into a shared-memory file; the bucket names the file and where each tensor lies in it::

    {..., "shm": {"path": "/dev/shm/arena-weights-....safetensors", "host": "<host id>",
                  "size": file bytes},
     "tensors": [{"name": ..., "dtype": ..., "shape": ..., "offset": byte offset in the file},
                 {"name": "lm_head.weight", ..., "offset": ..., "alias": "model.embed_tokens.weight"}]}

**Deltas.** A bucket may carry ``"since": V``: its update holds only the tensors that changed since
version ``V`` (a learner of named policies sends only the adapters that trained), and applies only
on top of ``V`` itself; a receiver serving another version refuses it with "needs a full update",
and the publisher sends every tensor again. Only tensors the receiving policy marks separable
(:meth:`~arena.policies.base.Policy.separable_weights`) may be left out.

The checksum is crc32 over the bucket's tensor bytes, in entry order, in both forms; a reference
entry with ``alias`` (a tied tensor, stored once) is left out of it, and the update is accepted
only if the tensor it names lies at the very same place, so its bytes are checked there.
"""

from __future__ import annotations

import logging
import math
import warnings
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from arena.core.dtypes import DTYPES
from arena.weights import NEEDS_FULL as NEEDS_FULL
from arena.weights import NOT_NEWER as NOT_NEWER

log = logging.getLogger("arena.weights")

DEFAULT_BUCKET_BYTES = 64 << 20

_TORCH_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name) for name in DTYPES if hasattr(torch, name)
}
"""Dtype name (:mod:`arena.core.dtypes`) to torch dtype: the dtypes a tensor may travel in."""
_FLOAT_DTYPES = frozenset(name for name in _TORCH_DTYPES if DTYPES[name].is_float)

Bucket = list[tuple[str, torch.Tensor]]
"""Named tensors that travel together (one ``weights`` message)."""


class WeightUpdateError(ValueError):
    """A weights bucket or update that must not be applied; the message says why."""


class StaleBucket(WeightUpdateError):
    """A bucket of a version that is already served or older than the one being assembled."""


def dtype_name(dtype: torch.dtype) -> str:
    """The name a torch dtype travels under (``torch.bfloat16`` -> ``bfloat16``)."""
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a bucket's dtype name stands for; raises :class:`WeightUpdateError`."""
    try:
        return _TORCH_DTYPES[name]
    except (KeyError, TypeError):
        raise WeightUpdateError(f"unknown dtype {name!r}") from None


class TensorSpec(NamedTuple):
    """A tensor's shape and dtype name: what an update of it must match."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes a tensor of this shape and dtype holds; raises :class:`WeightUpdateError` for
        an unknown dtype."""
        return math.prod(self.shape) * torch_dtype(self.dtype).itemsize


def tensor_nbytes(tensor: torch.Tensor) -> int:
    """Bytes of a tensor's elements (its storage may hold more)."""
    return tensor.numel() * tensor.element_size()


def tensor_bytes(tensor: torch.Tensor) -> np.ndarray:
    """A uint8 view of a CPU tensor's memory (bfloat16 included, which numpy cannot hold)."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy()


def frame_tensor(data: np.ndarray, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor viewing a received frame's (or a mapped file's) bytes, without a copy.

    Frames and mappings are read-only buffers and torch warns about that; the update is only
    ever read (copied into the model), so the warning is silenced rather than paid for with a
    copy of every tensor (for a 135M fp32 model, 540 MB of fresh memory per update).
    """
    if not data.nbytes:
        return torch.empty(shape, dtype=dtype)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(data, dtype=dtype).reshape(shape)


def view_key(tensor: torch.Tensor) -> tuple[Any, ...] | None:
    """Equal for two tensors that view the same memory the same way (tied weights); None where
    that cannot be told (meta tensors all look alike) or does not matter (empty tensors)."""
    if tensor.device.type == "meta" or not tensor.is_contiguous() or not tensor.numel():
        return None
    return (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape))


def tied_names(state: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """Names whose tensor is a view of an earlier name's, mapped to that name."""
    first: dict[tuple[Any, ...], str] = {}
    aliases = {}
    for name, tensor in state.items():
        key = view_key(tensor)
        if key is not None:
            if key in first:
                aliases[name] = first[key]
            else:
                first[key] = name
    return aliases


def tensor_specs(state: Mapping[str, torch.Tensor]) -> dict[str, TensorSpec]:
    """Each tensor's :class:`TensorSpec`, by name."""
    return {name: TensorSpec(tuple(t.shape), dtype_name(t.dtype)) for name, t in state.items()}


def check_tensor(
    expected: Mapping[str, TensorSpec], name: Any, dtype: Any, shape: Any
) -> TensorSpec:
    """The served spec of tensor ``name``; raises :class:`WeightUpdateError` unless ``shape``
    matches it and ``dtype`` is its dtype or, both being floats, one it can be cast from.

    ``name``, ``dtype`` and ``shape`` come off the wire or out of a file header: anything else
    than a known name, a dtype name and a list of sizes is refused the same way."""
    if not isinstance(name, str) or name not in expected:
        raise WeightUpdateError(f"unknown tensor {name!r}")
    spec = expected[name]
    # A float32 learner may feed a bfloat16 server: floats are cast on receipt. Any other dtype
    # change, or any shape change, is a corrupt update.
    castable = isinstance(dtype, str) and dtype in _FLOAT_DTYPES and spec.dtype in _FLOAT_DTYPES
    got = tuple(shape) if isinstance(shape, (list, tuple)) else () if shape is None else None
    if got != spec.shape or (dtype != spec.dtype and not castable):
        shown = list(got) if got is not None else f" shape {shape!r}"
        raise WeightUpdateError(
            f"{name}: got {dtype}{shown}, model has {spec.dtype}{list(spec.shape)}"
        )
    return spec


def as_served(tensor: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
    """``tensor`` in the served dtype (a copy where it differs)."""
    served = torch_dtype(spec.dtype)
    return tensor if tensor.dtype == served else tensor.to(served)


def plan_buckets(
    state: Mapping[str, torch.Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> list[Bucket]:
    """``state`` in order, cut into groups of at most ``bucket_bytes`` (a larger tensor gets its own)."""
    groups: list[Bucket] = [[]]
    size = 0
    for name, tensor in state.items():
        if groups[-1] and size + tensor_nbytes(tensor) > bucket_bytes:
            groups.append([])
            size = 0
        groups[-1].append((name, tensor))
        size += tensor_nbytes(tensor)
    return groups


def bucket_body(
    version: int, index: int, total: int, checksum: int, tensors: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    return {
        "version": version,
        "bucket": index,
        "num_buckets": total,
        "checksum": checksum,
        "tensors": tensors,
        **extra,
    }


def tensor_entry(name: str, tensor: torch.Tensor, **where: Any) -> dict[str, Any]:
    """A bucket's entry for one tensor: its name, dtype and shape, and where its bytes are
    (``data=`` frame, or ``offset=`` in a shared-memory file)."""
    return {"name": name, "dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape), **where}


def make_buckets(
    state: Mapping[str, torch.Tensor], version: int, bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> Iterator[dict[str, Any]]:
    """Yield bucket bodies for ``state`` with the bytes as frames (the form any host can read)."""
    return byte_buckets(plan_buckets(state, bucket_bytes), version)


def byte_buckets(groups: list[Bucket], version: int) -> Iterator[dict[str, Any]]:
    """Bodies in bytes form for buckets planned by :func:`plan_buckets`."""
    for index, group in enumerate(groups):
        tensors = []
        checksum = 0
        for name, tensor in group:
            data = tensor_bytes(tensor)
            checksum = zlib.crc32(data, checksum)
            tensors.append(tensor_entry(name, tensor, data=data))
        yield bucket_body(version, index, len(groups), checksum, tensors)
