"""Publishing weights: each version of a state dict as ``weights`` buckets on ``weights.<name>``.

- **Shared memory** (the default where ``/dev/shm`` is writable): a version is written once into
  a file there (:mod:`arena.weights.shm`) and the buckets on the bus only reference it, so
  receivers on this host copy straight from memory. A receiver that cannot map the file (another
  host) asks this actor for the bytes: service ``weights:<name>``, request body
  ``{"version": int, "bucket": int}``, reply = that bucket in bytes form (the frames a bus-only
  publisher would have sent). Only the latest version is held; an older one answers ``gone``.
- **Bus** (``shm=False``, no writable shared-memory directory, or a write that failed): the
  buckets carry the bytes as frames (:func:`arena.weights.buckets.make_buckets`).
- **CUDA IPC** (weights on a CUDA device, and every receiver heard from on that very device,
  :mod:`arena.weights.cuda_ipc`): one bucket naming a staging buffer on the GPU, which the
  receivers copy from device to device. The caller asks :meth:`WeightPublisher.on_device`
  whether to export the weights on the GPU, and reports each receiver's device
  (:meth:`WeightPublisher.note_receiver`).

Either way a receiver checks names, shapes, dtypes and per-bucket checksums before it applies
anything (:class:`arena.weights.assembler.WeightAssembler`). Every bucket carries the
publisher's ``epoch`` when it has one: a restarted learner's versions start again from its
checkpoint's, and the epoch tells receivers to take them.

Use::

    publisher = WeightPublisher("main")
    publisher.attach(actor)      # before actor.start(): serves the fetches
    publisher.publish(state, version, lambda body: ...)   # blocking: run it off the event loop;
                                 # the callback puts each body on publisher.topic as "weights"
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from arena.bus import Actor, BusError, Message
from arena.weights.buckets import (
    DEFAULT_BUCKET_BYTES,
    TensorSpec,
    bucket_body,
    byte_buckets,
    plan_buckets,
    tensor_entry,
)
from arena.weights.cuda_ipc import IpcExporter, choose, device_id
from arena.weights.shm import (
    SHM_DIR,
    SharedMemoryWriter,
    SharedWeightsFile,
    is_writable_dir,
    map_readonly,
)

log = logging.getLogger("arena.weights")


def fetch_service(name: str) -> str:
    """The service a publisher of policy ``name`` answers byte requests on."""
    return f"weights:{name}"


@dataclass
class _Held:
    file: SharedWeightsFile
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
        epoch: int | None = None,
        cuda_ipc: bool = True,
    ) -> None:
        """``cuda_ipc``: offer same-GPU receivers the update by CUDA IPC (when every receiver
        heard from shares the weights' GPU); off, weights always travel through host memory."""
        self.name = name
        self.epoch = epoch
        """Put on every bucket: receivers take a newer epoch's versions even when they are
        not newer (a learner restarted from its checkpoint; see :mod:`arena.weights.assembler`).
        None sends none."""
        self.topic = f"weights.{name}"
        self.bucket_bytes = bucket_bytes
        self._writer = (
            SharedMemoryWriter(name, directory) if shm and is_writable_dir(directory) else None
        )
        self._held: _Held | None = None
        self._ipc = IpcExporter() if cuda_ipc else None
        self.receivers: dict[str, str | None] = {}
        """The device (:func:`~arena.weights.cuda_ipc.device_id`) of each receiver heard from,
        by actor name."""
        if shm and self._writer is None:
            log.warning("%s is not writable: weights for %s go over the bus", directory, name)

    @property
    def transport(self) -> str:
        """``shm`` or ``bus``: how the next version will travel."""
        return "shm" if self._writer is not None else "bus"

    def note_receiver(self, actor: str, device: str | None) -> None:
        """Receiver ``actor`` serves on ``device`` (from its ``weights_ack``)."""
        self.receivers[actor] = device

    def on_device(self, device: torch.device | str) -> bool:
        """Whether weights on ``device`` would go by CUDA IPC now: then export them there."""
        if self._ipc is None:
            return False
        return choose(device_id(device), self.receivers.values(), shm=True) == "cuda_ipc"

    def attach(self, actor: Actor) -> None:
        """Serve byte fetches for receivers on other hosts (call before ``actor.start()``)."""
        actor.serve(fetch_service(self.name), self._on_fetch)

    def publish(
        self,
        state: Mapping[str, torch.Tensor],
        version: int,
        send: Callable[[dict[str, Any]], None],
        since: int | None = None,
    ) -> None:
        """Hand each bucket body of ``version`` to ``send`` (which puts it on :attr:`topic`) as
        soon as it is ready. With shared memory this writes the file (about half a second for
        540 MB): call it off the event loop; ``send`` must be safe to call from that thread.
        ``since``: ``state`` holds only what changed since that version (a delta,
        :mod:`arena.weights.buckets`)."""
        extra = self._epoch() | ({} if since is None else {"since": since})
        devices = {t.device for t in state.values()}
        if len(devices) == 1 and self.on_device(next(iter(devices))):
            assert self._ipc is not None
            self._held = None
            send(
                bucket_body(
                    version, 0, 1, 0, [], cuda_ipc=self._ipc.export(state, version), **extra
                )
            )
            return
        if any(d.type != "cpu" for d in devices):
            state = {k: v.to("cpu") for k, v in state.items()}
        groups = plan_buckets(state, self.bucket_bytes)
        if self._writer is not None:
            bodies: list[dict[str, Any]] = []

            def announce(file: SharedWeightsFile, index: int, checksum: int) -> None:
                tensors = [
                    tensor_entry(n, t, offset=file.offsets[n], **_alias(file, n))
                    for n, t in groups[index]
                ]
                bodies.append(
                    bucket_body(
                        version,
                        index,
                        len(groups),
                        checksum,
                        tensors,
                        shm=file.ref(),
                        **extra,
                    )
                )
                if index == 0:
                    self._held = _Held(file, bodies)  # fetchable from the first bucket on
                send(bodies[-1])

            try:
                self._writer.write(groups, version, announce)
                return
            except OSError as err:  # e.g. a small /dev/shm (a container's default is 64 MB)
                # Receivers complete this version from the byte buckets below: every bucket
                # again, whatever references they already took.
                log.warning(
                    "writing weights to shared memory failed (%s); using the bus from now on", err
                )
                self._writer.close()
                self._writer = None
        self._held = None
        for body in byte_buckets(groups, version):
            send(body | extra)

    def _epoch(self) -> dict[str, int]:
        return {} if self.epoch is None else {"epoch": self.epoch}

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
        if held is None or held.file.version != version or index >= len(held.bodies):
            latest = held.file.version if held else None
            raise BusError(
                "gone", f"version {version} of {self.name} is not held here (latest: {latest})"
            )
        if index < 0:
            raise BusError("bad_request", f"bucket {index} is negative")
        if held.mapped is None:
            try:
                held.mapped = map_readonly(held.file.path, held.file.size)
            except (OSError, ValueError) as err:  # superseded meanwhile, and removed
                raise BusError("gone", f"version {version} of {self.name}: {err}") from None
        ref = held.bodies[index]
        tensors = []
        # The bytes form checksums every entry; the reference's checksum skips aliases. Both are
        # computed here, so bytes that changed in the file since they were written are caught.
        checksum = written = 0
        for item in ref["tensors"]:
            start = item["offset"]
            data = held.mapped[
                start : start + TensorSpec(tuple(item["shape"]), item["dtype"]).nbytes
            ]
            checksum = zlib.crc32(data, checksum)
            if "alias" not in item:
                written = zlib.crc32(data, written)
            fields = {k: v for k, v in item.items() if k not in ("offset", "alias")}
            tensors.append(fields | {"data": data})
        if written != ref["checksum"]:
            raise BusError(
                "corrupt", f"bucket {index} of version {version} changed in {held.file.path}"
            )
        return {k: v for k, v in ref.items() if k != "shm"} | {
            "tensors": tensors,
            "checksum": checksum,
        }


def _alias(file: SharedWeightsFile, name: str) -> dict[str, str]:
    return {"alias": file.aliases[name]} if name in file.aliases else {}
