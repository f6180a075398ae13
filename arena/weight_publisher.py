"""Publishing weights: each version of a state dict as ``weights`` buckets on ``weights.<name>``.

- **Shared memory** (the default where ``/dev/shm`` is writable): a version is written once into
  a file there (:mod:`arena.shm_weights`) and the buckets on the bus only reference it, so
  receivers on this host copy straight from memory. A receiver that cannot map the file (another
  host) asks this actor for the bytes: service ``weights:<name>``, request body
  ``{"version": int, "bucket": int}``, reply = that bucket in bytes form (the frames a bus-only
  publisher would have sent). Only the latest version is held; an older one answers ``gone``.
- **Bus** (``shm=False``, no writable shared-memory directory, or a write that failed): the
  buckets carry the bytes as frames (:func:`arena.weights.make_buckets`).

Either way a receiver checks names, shapes, dtypes and per-bucket checksums before it applies
anything (:class:`arena.weights.WeightAssembler`).

Use::

    publisher = WeightPublisher("main")
    publisher.attach(actor)                          # before actor.start(): serves the fetches
    for body in publisher.buckets(state, version):   # blocking: run it off the event loop
        actor.publish(publisher.topic, body, mtype="weights")
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from arena.bus import Actor, BusError, Message
from arena.shm_weights import SHM_DIR, ShmVersion, ShmWriter, map_file, usable
from arena.weights import (
    DEFAULT_BUCKET_BYTES,
    bucket_body,
    byte_buckets,
    entry,
    plan_buckets,
    spec_nbytes,
)

log = logging.getLogger("arena.weights")


def fetch_service(name: str) -> str:
    """The service a publisher of policy ``name`` answers byte requests on."""
    return f"weights:{name}"


@dataclass
class _Held:
    written: ShmVersion
    bodies: list[dict[str, Any]]
    mapped: np.ndarray | None = None


class WeightPublisher:
    """Turns versions of a state dict into ``weights`` bucket bodies for topic :attr:`topic`."""

    def __init__(
        self,
        name: str,
        *,
        shm: bool = True,
        directory: str | os.PathLike[str] = SHM_DIR,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    ) -> None:
        self.name = name
        self.topic = f"weights.{name}"
        self.bucket_bytes = bucket_bytes
        self._writer = ShmWriter(name, directory) if shm and usable(directory) else None
        self._held: _Held | None = None
        if shm and self._writer is None:
            log.warning("%s is not writable: weights for %s go over the bus", directory, name)

    @property
    def transport(self) -> str:
        """``shm`` or ``bus``: how the next version will travel."""
        return "shm" if self._writer is not None else "bus"

    def attach(self, actor: Actor) -> None:
        """Serve byte fetches for receivers on other hosts (call before ``actor.start()``)."""
        actor.serve(fetch_service(self.name), self._on_fetch)

    def buckets(self, state: Mapping[str, torch.Tensor], version: int) -> list[dict[str, Any]]:
        """The bucket bodies of ``version``; with shared memory this writes the file, so it
        takes a while (about half a second for 540 MB): call it off the event loop."""
        groups = plan_buckets(state, self.bucket_bytes)
        if self._writer is not None:
            try:
                written = self._writer.write(groups, version)
            except OSError as err:  # e.g. a small /dev/shm (a container's default is 64 MB)
                log.warning("writing weights to shared memory failed (%s); using the bus from now on", err)
                self._writer.close()
                self._writer = None
            else:
                bodies = [
                    bucket_body(version, i, len(groups), written.checksums[i],
                                [entry(n, t, offset=written.offsets[n]) for n, t in group],
                                shm=written.ref())  # fmt: skip
                    for i, group in enumerate(groups)
                ]
                self._held = _Held(written, bodies)
                return bodies
        self._held = None
        return list(byte_buckets(groups, version))

    def close(self) -> None:
        """Remove the shared-memory file (receivers that mapped it keep their mapping)."""
        self._held = None
        if self._writer is not None:
            self._writer.close()

    def _on_fetch(self, msg: Message) -> dict[str, Any]:
        body = msg.body if isinstance(msg.body, dict) else {}
        held = self._held
        try:
            version, index = int(body["version"]), int(body["bucket"])
        except (KeyError, TypeError, ValueError):
            raise BusError("bad_request", "a fetch needs integer 'version' and 'bucket'") from None
        if held is None or held.written.version != version:
            latest = held.written.version if held else None
            raise BusError("gone", f"version {version} of {self.name} is not held here (latest: {latest})")
        if not 0 <= index < len(held.bodies):
            raise BusError("bad_request", f"bucket {index} outside 0..{len(held.bodies) - 1}")
        if held.mapped is None:
            try:
                held.mapped = map_file(held.written.path, held.written.size)
            except (OSError, ValueError) as err:  # superseded meanwhile, and removed
                raise BusError("gone", f"version {version} of {self.name}: {err}") from None
        ref = held.bodies[index]
        tensors = []
        for item in ref["tensors"]:
            start = item["offset"]
            end = start + spec_nbytes((tuple(item["shape"]), item["dtype"]))
            tensors.append({k: v for k, v in item.items() if k != "offset"} | {"data": held.mapped[start:end]})
        return {k: v for k, v in ref.items() if k != "shm"} | {"tensors": tensors}
