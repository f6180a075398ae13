"""Same-GPU weight transport: a learner and an inference actor on one CUDA device share the
update's memory through a CUDA IPC handle, so no byte of it passes through host memory.

- **When.** Each end names its device by :func:`device_id` (``<boot id>/<GPU uuid>``, None for
  a CPU). The publisher offers an IPC update only when its weights are on a CUDA device and
  every receiver it has heard from (their ``weights_ack`` carry their ``device``) names the
  same one (:func:`choose`); otherwise it publishes by shared memory or the bus as before. A
  receiver that gets an offer it cannot open (another GPU, another host, or one the publisher
  did not know of yet) refuses it saying it :data:`NEEDS_BYTES`, with its device; the
  learner then records that receiver and publishes again by bytes (trainers/learner_actor.py).
- **How.** The publisher copies the state, on its GPU, into one staging buffer (two, used in
  turn, so a receiver has a whole publish interval to take version ``v`` before ``v + 2``
  overwrites its buffer), synchronises, and sends one ``weights`` bucket whose ``cuda_ipc``
  field names the buffer's IPC handle (``UntypedStorage._share_cuda_``: plain bytes and ints,
  no pickle on the bus) and each tensor's dtype, shape and offset. The receiver opens the handle
  once per buffer and copies each tensor out on the GPU (device to device) as soon as the bucket
  arrives, checked against the served parameters' names, shapes and dtypes like any update.
  There is no checksum: the bytes never leave the GPU's memory.

Only CUDA can run the data path; tests/arena/weights/test_cuda_ipc.py runs it on a host with a
GPU (its ``[cuda]`` variant) and checks the decision table everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from arena.weights.buckets import (
    WeightUpdateError,
    as_served,
    check_tensor,
    dtype_name,
    tensor_specs,
    torch_dtype,
)
from arena.weights.shm import _boot_id

NEEDS_BYTES = "needs the update as bytes (it cannot open this CUDA IPC handle)"
"""In a refusal's reason: the receiver is on another device than the publisher."""
ALIGN = 256
"""Byte alignment of each tensor in the staging buffer (any dtype's, and CUDA's copy kernels')."""


def device_id(device: torch.device | str | None) -> str | None:
    """``<boot id>/<GPU uuid>`` of a CUDA device (one kernel, one physical GPU); None for
    any other device. Two processes share memory by IPC exactly when their ids are equal."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"{_boot_id()}/{torch.cuda.get_device_properties(index).uuid}"


def choose(publisher: str | None, receivers: Iterable[str | None], shm: bool) -> str:
    """How the next update travels: ``cuda_ipc`` when the publisher's weights are on a CUDA
    device and every known receiver (at least one) is on that very device; else ``shm`` where
    shared memory is on, else ``bus``."""
    known = list(receivers)
    if publisher is not None and known and all(r == publisher for r in known):
        return "cuda_ipc"
    return "shm" if shm else "bus"


def can_open(offer: Mapping[str, Any], own: str | None) -> bool:
    """Whether a receiver on device ``own`` can open the IPC ``offer``."""
    return own is not None and offer.get("device") == own


class IpcExporter:
    """The publisher's side: staging buffers on its GPU and the offers that name them."""

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor | None] = [None, None]
        self._handles: list[list[Any] | None] = [None, None]

    def export(self, state: Mapping[str, torch.Tensor], version: int) -> dict[str, Any]:
        """Copy ``state`` (CUDA tensors, one device) into a staging buffer; return the offer
        (the ``cuda_ipc`` field of a bucket body). Blocks until the copies are done."""
        tensors, size = [], 0
        device = next(iter(state.values())).device
        for name, tensor in state.items():
            if tensor.device != device:
                raise ValueError(f"{name} is on {tensor.device}, the update on {device}")
            tensors.append(
                {
                    "name": name,
                    "dtype": dtype_name(tensor.dtype),
                    "shape": list(tensor.shape),
                    "offset": size,
                }
            )
            size += -(-tensor.numel() * tensor.element_size() // ALIGN) * ALIGN
        slot = version % 2
        buffer = self._buffers[slot]
        if buffer is None or buffer.numel() < size or buffer.device != device:
            buffer = self._buffers[slot] = torch.empty(size, dtype=torch.uint8, device=device)
            self._handles[slot] = _wire(buffer.untyped_storage()._share_cuda_())
        for entry, tensor in zip(tensors, state.values(), strict=True):
            nbytes = tensor.numel() * tensor.element_size()
            view = buffer[entry["offset"] : entry["offset"] + nbytes]
            view.view(tensor.dtype).view(tensor.shape).copy_(tensor.detach())
        torch.cuda.synchronize(device)
        return {
            "device": device_id(device),
            "handle": self._handles[slot],
            "size": int(buffer.numel()),
            "tensors": tensors,
        }


class IpcImporter:
    """The receiver's side: opens offers (each buffer once) and copies their tensors out."""

    def __init__(self) -> None:
        self._opened: dict[tuple[bytes, int, int], torch.Tensor] = {}

    def take(
        self, offer: Mapping[str, Any], expected: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Device copies of the offer's tensors, checked against ``expected`` (the served
        parameters: names, shapes, dtypes); raises :class:`WeightUpdateError`."""
        device = next(iter(expected.values())).device
        try:
            handle = list(_unwire(offer["handle"]))
            key = _opened_key(handle)
            buffer = self._opened.get(key)
            if buffer is None:
                if device.type != "cuda":
                    raise RuntimeError(f"the served weights are on {device}")
                # this process's index of the GPU (the uuids matched; the indices may not, where
                # the two processes see different CUDA_VISIBLE_DEVICES)
                handle[0] = (
                    device.index if device.index is not None else torch.cuda.current_device()
                )
                storage = torch.UntypedStorage._new_shared_cuda(*handle)
                buffer = torch.empty(0, dtype=torch.uint8, device=storage.device)
                buffer.set_(storage, 0, (storage.nbytes(),), (1,))
                self._opened[key] = buffer
            entries = [e if isinstance(e, Mapping) else {} for e in offer["tensors"]]
        except (KeyError, TypeError, IndexError, RuntimeError) as err:
            raise WeightUpdateError(f"a CUDA IPC offer that cannot be opened: {err}") from None
        specs = tensor_specs(expected)
        state = {}
        for entry in entries:
            name = entry.get("name")
            spec = check_tensor(specs, name, entry.get("dtype"), entry.get("shape"))
            dtype, shape = torch_dtype(entry["dtype"]), spec.shape
            nbytes = dtype.itemsize * _numel(shape)
            start = entry.get("offset")
            if not isinstance(start, int) or start < 0 or start + nbytes > buffer.numel():
                raise WeightUpdateError(f"{name} lies outside the offered buffer")
            view = buffer[start : start + nbytes].view(dtype).view(shape)
            state[name] = as_served(view.to(expected[name].device, copy=True), spec)
        return state


def _opened_key(handle: list[Any]) -> tuple[bytes, int, int]:
    """Which buffer an offer names: its allocation's IPC handle, and its offset and size in
    that allocation. The handle alone names the caching allocator's whole segment, which can
    hold both staging buffers (the allocator splits a freed segment the learner held): keyed
    by it alone, the second buffer's offers would read the first's, an older version."""
    return bytes(handle[1]), int(handle[3]), int(handle[2])


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _wire(share: tuple) -> list[Any]:
    """``_share_cuda_``'s tuple as msgpack-able values (bytes, ints, bools)."""
    return [v if isinstance(v, bytes | bool) else int(v) for v in share]


def _unwire(handle: list[Any]) -> tuple:
    """The wire's values back as ``_new_shared_cuda`` takes them."""
    return tuple(bytes(v) if isinstance(v, bytes | bytearray) else v for v in handle)
