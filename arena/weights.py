"""Weights on the bus: a state dict cut into buckets, each with a version and a checksum.

The learner publishes a new policy version as ``weights`` messages, one per bucket (never one
message per parameter, never a msgpack list). A bucket carries its tensors in one of two forms.

**Bytes** (:func:`make_buckets`): each tensor's bytes travel as their own zero-copy frame::

    {"version": 7, "bucket": 0, "num_buckets": 9, "checksum": crc32 of the tensor bytes,
     "tensors": [{"name": "model.embed_tokens.weight", "dtype": "float32",
                  "shape": [49152, 576], "data": <uint8 ndarray>}, ...]}

**Same-host reference** (:mod:`arena.shm_weights`): the publisher wrote the whole version once
into a shared-memory file; the bucket names the file and where each tensor lies in it::

    {..., "shm": {"path": "/dev/shm/arena-weights-....safetensors", "host": "<host id>",
                  "size": file bytes},
     "tensors": [{"name": ..., "dtype": ..., "shape": ..., "offset": byte offset in the file},
                 {"name": "lm_head.weight", ..., "offset": ..., "alias": "model.embed_tokens.weight"}]}

The checksum is crc32 over the bucket's tensor bytes, in entry order, in both forms; a reference
entry with ``alias`` (a tied tensor, stored once) is left out of it, and the update is accepted
only if the tensor it names lies at the very same place, so its bytes are checked there.

The receiver's :class:`WeightAssembler` checks every bucket (names, shapes, dtypes, bounds,
checksum) against the model it serves and yields the full update only when every bucket of one
version has arrived. Float tensors may arrive in another float dtype (a float32 learner, a
bfloat16 server) and are cast to the served one; any other dtype change is refused. A partial
update (a missing bucket: a newer version starts, or it times out) or a corrupt one is rejected
with a reason and the old weights keep serving. A bucket of a version older than the one being
assembled is refused without disturbing the newer one.
"""

from __future__ import annotations

import logging
import time
import warnings
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

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

Spec = tuple[tuple[int, ...], str]
"""A tensor's shape and dtype name: what an update must match."""
Bucket = list[tuple[str, torch.Tensor]]


class FileSource(Protocol):
    """Where reference buckets' bytes come from (:class:`arena.shm_weights.ShmReader`)."""

    def open(self, ref: Mapping[str, Any]) -> np.ndarray:
        """The bytes of the file a bucket's ``shm`` field names (read-only uint8)."""

    def forget(self) -> None:
        """Drop any file kept open between buckets."""


class WeightUpdateError(ValueError):
    """A weights bucket or update that must not be applied; the message says why."""


class StaleBucket(WeightUpdateError):
    """A bucket of a version that is already served or older than the one being assembled."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> torch.dtype:
    try:
        return _TORCH_DTYPES[name]
    except KeyError:
        raise WeightUpdateError(f"unknown dtype {name!r}") from None


def nbytes(tensor: torch.Tensor) -> int:
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


def tied(state: Mapping[str, torch.Tensor]) -> dict[str, str]:
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


def specs(state: Mapping[str, torch.Tensor]) -> dict[str, Spec]:
    return {name: (tuple(t.shape), dtype_name(t.dtype)) for name, t in state.items()}


def spec_nbytes(spec: Spec) -> int:
    return int(np.prod(spec[0])) * torch_dtype(spec[1]).itemsize


def check_spec(expected: Mapping[str, Spec], name: Any, dtype: Any, shape: Any) -> Spec:
    """The served spec of tensor ``name``; raises unless ``shape`` matches it and ``dtype`` is
    its dtype or, both being floats, one it can be cast from."""
    if name not in expected:
        raise WeightUpdateError(f"unknown tensor {name!r}")
    spec = expected[name]
    # A float32 learner may feed a bfloat16 server: floats are cast on receipt. Any other dtype
    # change, or any shape change, is a corrupt update.
    castable = dtype in _FLOAT_DTYPES and spec[1] in _FLOAT_DTYPES
    if tuple(shape or ()) != spec[0] or (dtype != spec[1] and not castable):
        raise WeightUpdateError(f"{name}: got {dtype}{list(shape or ())}, model has {spec[1]}{list(spec[0])}")
    return spec


def as_served(tensor: torch.Tensor, spec: Spec) -> torch.Tensor:
    """``tensor`` in the served dtype (a copy where it differs)."""
    served = torch_dtype(spec[1])
    return tensor if tensor.dtype == served else tensor.to(served)


def plan_buckets(state: Mapping[str, torch.Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> list[Bucket]:
    """``state`` in order, cut into groups of at most ``bucket_bytes`` (a larger tensor gets its own)."""
    groups: list[Bucket] = [[]]
    size = 0
    for name, tensor in state.items():
        if groups[-1] and size + nbytes(tensor) > bucket_bytes:
            groups.append([])
            size = 0
        groups[-1].append((name, tensor))
        size += nbytes(tensor)
    return groups


def bucket_body(version: int, index: int, total: int, checksum: int, tensors: list[dict[str, Any]],
                **extra: Any) -> dict[str, Any]:  # fmt: skip
    return {"version": version, "bucket": index, "num_buckets": total, "checksum": checksum,
            "tensors": tensors, **extra}  # fmt: skip


def entry(name: str, tensor: torch.Tensor, **where: Any) -> dict[str, Any]:
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
            tensors.append(entry(name, tensor, data=data))
        yield bucket_body(version, index, len(groups), checksum, tensors)


@dataclass
class _Checked:
    """One bucket's tensors, and for references where each lies and which it claims to alias."""

    tensors: dict[str, torch.Tensor]
    places: dict[str, tuple[Any, ...]]
    aliases: dict[str, str]


@dataclass
class _Partial:
    version: int
    num_buckets: int
    started: float
    buckets: dict[int, _Checked] = field(default_factory=dict)


class WeightAssembler:
    """Collects buckets into a complete, validated update for a model of known parameters.

    ``files`` reads same-host references (default: a fresh :class:`~arena.shm_weights.ShmReader`).
    """

    def __init__(
        self, expected: Mapping[str, torch.Tensor], timeout: float = 120.0, files: FileSource | None = None
    ) -> None:
        if files is None:
            # Imported here, not at the top: arena.shm_weights builds on this module.
            from arena.shm_weights import ShmReader

            files = ShmReader()
        self.expected = specs(expected)
        self.timeout = timeout
        self.files = files
        self.counters: Counter[str] = Counter()
        self.last_version = -1
        self._partial: _Partial | None = None

    def add(self, body: Any) -> tuple[int, dict[str, torch.Tensor]] | None:
        """Take one bucket; return ``(version, state)`` once the update is complete.

        Raises :class:`WeightUpdateError` for a corrupt bucket, which also drops the update it
        belonged to, and :class:`StaleBucket` for one of an old version, which drops nothing.
        """
        try:
            version, index, total, checked = self._check_bucket(body)
        except StaleBucket:
            self.counters["stale"] += 1
            raise
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
        partial.buckets[index] = checked
        if len(partial.buckets) < partial.num_buckets:
            return None
        self._partial = None
        self.files.forget()  # the state's tensors keep a mapping alive as long as they need it
        buckets = partial.buckets.values()
        state = {name: t for bucket in buckets for name, t in bucket.tensors.items()}
        places = {name: place for bucket in buckets for name, place in bucket.places.items()}
        missing = set(self.expected) - set(state)
        for alias, target in (pair for bucket in buckets for pair in bucket.aliases.items()):
            if target not in places or places[target] != places[alias]:  # else unchecked bytes
                missing.add(alias)
        if missing:
            self.counters["rejected"] += 1
            raise WeightUpdateError(f"update {version} lacks {len(missing)} tensors, e.g. {sorted(missing)[0]}")
        self.last_version = version
        self.counters["applied"] += 1
        return version, state

    def check_fresh(self, version: int) -> None:
        """Raise :class:`StaleBucket` unless ``version`` is newer than the served one and not
        older than the one being assembled."""
        if version <= self.last_version:
            raise StaleBucket(f"version {version} is not newer than {self.last_version}")
        if self._partial is not None and version < self._partial.version:
            raise StaleBucket(f"version {version} is older than update {self._partial.version} in progress")

    def _check_bucket(self, body: Any) -> tuple[int, int, int, _Checked]:
        if not isinstance(body, dict):
            raise WeightUpdateError("bucket must be a map")
        try:
            version, index, total = int(body["version"]), int(body["bucket"]), int(body["num_buckets"])
            checksum, entries = int(body["checksum"]), body["tensors"]
        except (KeyError, TypeError, ValueError) as err:
            raise WeightUpdateError(f"bucket lacks or garbles field {err}") from None
        self.check_fresh(version)
        if not 0 <= index < total:
            raise WeightUpdateError(f"bucket index {index} outside 0..{total - 1}")
        mapped = self._mapped(body)
        crc = 0
        checked = _Checked({}, {}, {})
        for item in entries:
            if not isinstance(item, dict):
                raise WeightUpdateError("a tensor entry must be a map")
            name, sent = item.get("name"), item.get("dtype")
            spec = check_spec(self.expected, name, sent, item.get("shape"))
            size = spec_nbytes((spec[0], sent))
            data = self._data(item, mapped, size)
            if data.nbytes != size:
                raise WeightUpdateError(f"{name}: {data.nbytes} bytes do not fit {sent}{list(spec[0])}")
            if mapped is not None:
                checked.places[name] = (body["shm"].get("path"), item["offset"], sent, spec[0])
            if mapped is not None and "alias" in item:  # checked with the tensor it aliases
                checked.aliases[name] = item["alias"]
            else:
                crc = zlib.crc32(data, crc)
            checked.tensors[name] = as_served(frame_tensor(data, torch_dtype(sent), spec[0]), spec)
        if crc != checksum:
            raise WeightUpdateError(f"checksum mismatch in bucket {index} of version {version}")
        return version, index, total, checked

    def _mapped(self, body: dict[str, Any]) -> np.ndarray | None:
        ref = body.get("shm")
        if ref is None:
            return None
        try:
            return self.files.open(ref)
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise WeightUpdateError(f"cannot map shared-memory weights: {err}") from None

    @staticmethod
    def _data(item: Mapping[str, Any], mapped: np.ndarray | None, size: int) -> np.ndarray:
        name = item.get("name")
        if mapped is None:
            data = item.get("data")
            if not isinstance(data, np.ndarray) or data.dtype != np.uint8:
                raise WeightUpdateError(f"{name}: data must be a uint8 frame")
            return data
        offset = item.get("offset")
        if not isinstance(offset, int) or not 0 <= offset <= len(mapped) - size:
            raise WeightUpdateError(f"{name}: offset {offset!r} outside the {len(mapped)}-byte file")
        return mapped[offset : offset + size]

    def _expired(self, partial: _Partial) -> bool:
        return time.monotonic() - partial.started > self.timeout

    def _drop(self, reason: str) -> None:
        if self._partial is not None or reason.startswith("corrupt"):
            self.counters["rejected"] += 1
            log.warning("weight update rejected, old weights keep serving: %s", reason)
        self._partial = None
        self.files.forget()
