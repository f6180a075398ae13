"""Assembling weight updates: buckets in, one complete and validated state dict out.

The receiver's :class:`WeightAssembler` checks every bucket (names, shapes, dtypes, bounds,
checksum) against the model it serves and yields the full update only when every bucket of one
version has arrived. Float tensors may arrive in another float dtype (a float32 learner, a
bfloat16 server) and are cast to the served one; any other dtype change is refused. A partial
update (a missing bucket: a newer version starts, or it times out) or a corrupt one is rejected
with a reason and the old weights keep serving. A bucket of a version older than the one being
assembled is refused without disturbing the newer one. A delta (``since``,
:mod:`arena.weights.buckets`) is taken only on top of the version it was made against, and may
leave out only the ``separable`` tensors.

**Epochs.** A bucket may carry the ``epoch`` of its publisher (a learner's start time in
nanoseconds, :mod:`arena.weights.publisher`). Versions are compared within one epoch. A newer
epoch is a publisher that restarted, from its checkpoint: its versions count again from that
checkpoint's step, so its update is taken even when its version is not newer than the served
one (the served weights roll back to the checkpoint's), and from then on buckets of an older
epoch (a dead publisher's, still on their way) are stale. A bucket without an epoch, or a
receiver that has taken none yet, compares versions only.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from arena.core.limits import WEIGHT_UPDATE
from arena.weights.buckets import (
    NEEDS_FULL,
    NOT_NEWER,
    StaleBucket,
    TensorSpec,
    WeightUpdateError,
    as_served,
    check_tensor,
    frame_tensor,
    tensor_specs,
    torch_dtype,
)
from arena.weights.shm import SharedMemoryReader

log = logging.getLogger("arena.weights")


class FileSource(Protocol):
    """Where reference buckets' bytes come from (:class:`arena.weights.shm.SharedMemoryReader`)."""

    def open(self, ref: Mapping[str, Any]) -> np.ndarray:
        """The bytes of the file a bucket's ``shm`` field names (read-only uint8)."""

    def forget(self) -> None:
        """Drop any file kept open between buckets."""


@dataclass
class _Checked:
    """One bucket's tensors, and for references where each lies and which it claims to alias."""

    tensors: dict[str, torch.Tensor]
    places: dict[str, tuple[Any, ...]]
    aliases: dict[str, str]


@dataclass
class _Partial:
    version: int
    epoch: int | None
    num_buckets: int
    started: float
    since: int | None
    buckets: dict[int, _Checked] = field(default_factory=dict)


class WeightAssembler:
    """Collects buckets into a complete, validated update for a model of known parameters.

    ``files`` reads same-host references (default: a fresh
    :class:`~arena.weights.shm.SharedMemoryReader`); ``separable`` names the tensors a delta may
    leave out.
    """

    def __init__(
        self,
        expected: Mapping[str, torch.Tensor],
        timeout: float = WEIGHT_UPDATE,
        files: FileSource | None = None,
        separable: Collection[str] = (),
    ) -> None:
        if files is None:
            files = SharedMemoryReader()
        self.expected = tensor_specs(expected)
        self.separable = frozenset(separable)
        self.timeout = timeout
        self.files = files
        self.counters: Counter[str] = Counter()
        self.last_version = -1
        self.last_epoch: int | None = None
        """The epoch of the last update taken (None: none carried one)."""
        self._partial: _Partial | None = None

    def add(self, body: Any) -> tuple[int, dict[str, torch.Tensor]] | None:
        """Take one bucket; return ``(version, state)`` once the update is complete.

        Raises :class:`WeightUpdateError` for a corrupt bucket, which also drops the update it
        belonged to, and :class:`StaleBucket` for one of an old version, which drops nothing.
        """
        try:
            version, epoch, since, index, total, checked = self._check_bucket(body)
        except StaleBucket:
            self.counters["stale"] += 1
            raise
        except WeightUpdateError as err:
            self._drop(f"corrupt bucket: {err}")
            raise
        partial = self._partial
        if partial is not None and (
            (partial.version, partial.epoch) != (version, epoch) or self._expired(partial)
        ):
            self._drop(
                f"update {partial.version} incomplete: "
                f"{len(partial.buckets)}/{partial.num_buckets} buckets arrived"
            )
            partial = None
        if partial is None:
            partial = self._partial = _Partial(version, epoch, total, time.monotonic(), since)
        if (total, since) != (partial.num_buckets, partial.since):
            self._drop("buckets disagree on num_buckets or since")
            raise WeightUpdateError(
                f"bucket {index} says {total} buckets since {since}, update has "
                f"{partial.num_buckets} since {partial.since}"
            )
        partial.buckets[index] = checked
        if len(partial.buckets) < partial.num_buckets:
            return None
        self._partial = None
        self.files.forget()  # the state's tensors keep a mapping alive as long as they need it
        buckets = partial.buckets.values()
        state = {name: t for bucket in buckets for name, t in bucket.tensors.items()}
        places = {name: place for bucket in buckets for name, place in bucket.places.items()}
        unchecked = set()
        for alias, target in (pair for bucket in buckets for pair in bucket.aliases.items()):
            if target not in places or places[target] != places[alias]:  # else unchecked bytes
                unchecked.add(alias)
        return self.complete(version, epoch, since, state, unchecked)

    def complete(
        self,
        version: int,
        epoch: int | None,
        since: int | None,
        state: dict[str, torch.Tensor],
        unchecked: set[str] | None = None,
    ) -> tuple[int, dict[str, torch.Tensor]]:
        """Accept a whole update whose tensors are checked (the last bucket's, or a CUDA IPC
        offer's, :mod:`arena.weights.cuda_ipc`) unless it lacks a tensor: a delta (``since``)
        may lack only separable ones, and only against the version served."""
        missing = set(self.expected) - set(state)
        if since is not None:
            if since != self.last_version or _later(epoch, self.last_epoch) is not None:
                self.counters["rejected"] += 1
                raise WeightUpdateError(
                    f"update {version} holds what changed since version {since}, but version "
                    f"{self.last_version} is served: it {NEEDS_FULL}"
                )
            missing -= self.separable
        missing |= unchecked or set()
        if missing:
            self.counters["rejected"] += 1
            raise WeightUpdateError(
                f"update {version} lacks {len(missing)} tensors, e.g. {sorted(missing)[0]}"
            )
        self.last_version = version
        if epoch is not None:
            self.last_epoch = epoch
        self.counters["applied"] += 1
        return version, state

    def check_fresh(self, version: int, epoch: int | None = None) -> None:
        """Raise :class:`StaleBucket` unless ``version`` is newer than the served one and not
        older than the one being assembled (within one epoch; a newer epoch is always fresh,
        an older one never: see the module docstring)."""
        if _later(epoch, self.last_epoch) is None:
            if version <= self.last_version:
                raise StaleBucket(f"version {version} {NOT_NEWER} {self.last_version}")
        elif not _later(epoch, self.last_epoch):
            raise StaleBucket(
                f"version {version} comes from a publisher that has restarted since "
                f"(epoch {epoch}, the served weights' is {self.last_epoch})"
            )
        partial = self._partial
        if partial is None:
            return
        newer_epoch = _later(epoch, partial.epoch)
        if newer_epoch is False or (newer_epoch is None and version < partial.version):
            raise StaleBucket(
                f"version {version} is older than update {partial.version} in progress"
            )

    def _check_bucket(self, body: Any) -> tuple[int, int | None, int | None, int, int, _Checked]:
        if not isinstance(body, dict):
            raise WeightUpdateError("bucket must be a map")
        try:
            version, index, total = (
                int(body["version"]),
                int(body["bucket"]),
                int(body["num_buckets"]),
            )
            checksum, entries = int(body["checksum"]), body["tensors"]
        except (KeyError, TypeError, ValueError) as err:
            raise WeightUpdateError(f"bucket lacks or garbles field {err}") from None
        epoch = body.get("epoch")
        if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
            raise WeightUpdateError(f"bucket epoch must be an integer, got {epoch!r}")
        since = body.get("since")
        if since is not None and (not isinstance(since, int) or isinstance(since, bool)):
            raise WeightUpdateError(f"bucket since must be an integer version, got {since!r}")
        self.check_fresh(version, epoch)
        if not 0 <= index < total:
            raise WeightUpdateError(f"bucket index {index} outside 0..{total - 1}")
        mapped = self._mapped(body)
        crc = 0
        checked = _Checked({}, {}, {})
        for item in entries:
            if not isinstance(item, dict):
                raise WeightUpdateError("a tensor entry must be a map")
            name, sent = item.get("name"), item.get("dtype")
            spec = check_tensor(self.expected, name, sent, item.get("shape"))
            size = TensorSpec(spec.shape, sent).nbytes
            data = self._data(item, mapped, size)
            if data.nbytes != size:
                raise WeightUpdateError(
                    f"{name}: {data.nbytes} bytes do not fit {sent}{list(spec.shape)}"
                )
            if mapped is not None:
                checked.places[name] = (body["shm"].get("path"), item["offset"], sent, spec.shape)
            if mapped is not None and "alias" in item:  # checked with the tensor it aliases
                checked.aliases[name] = item["alias"]
            else:
                crc = zlib.crc32(data, crc)
            checked.tensors[name] = as_served(
                frame_tensor(data, torch_dtype(sent), spec.shape), spec
            )
        if crc != checksum:
            raise WeightUpdateError(f"checksum mismatch in bucket {index} of version {version}")
        return version, epoch, since, index, total, checked

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
            raise WeightUpdateError(
                f"{name}: offset {offset!r} outside the {len(mapped)}-byte file"
            )
        return mapped[offset : offset + size]

    def _expired(self, partial: _Partial) -> bool:
        return time.monotonic() - partial.started > self.timeout

    def _drop(self, reason: str) -> None:
        if self._partial is not None or reason.startswith("corrupt"):
            self.counters["rejected"] += 1
            log.warning("weight update rejected, old weights keep serving: %s", reason)
        self._partial = None
        self.files.forget()


def _later(epoch: int | None, than: int | None) -> bool | None:
    """Whether ``epoch`` is a later publisher's than ``than``: True, False (an earlier one's),
    or None when they are the same publisher or either is unknown (compare versions then)."""
    if epoch is None or than is None or epoch == than:
        return None
    return epoch > than
