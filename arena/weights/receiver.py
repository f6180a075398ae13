"""Receiving weights for one served policy, by every route, each validated before it is used.

- **Buckets in bytes form** (frames on the bus) and **same-host references** (a shared-memory
  file this process maps, :mod:`arena.weights.shm`) go to a :class:`~arena.weights.assembler.WeightAssembler`.
- **A reference this process cannot map** (the publisher is on another host, or the file cannot
  be opened, or shared memory is turned off here) is fetched in bytes form from the publisher
  (:mod:`arena.weights.publisher`), then assembled the same way.
- **A CUDA IPC offer** (:mod:`arena.weights.cuda_ipc`), where this receiver serves on the
  publisher's GPU: its tensors copied from device to device, checked like any update; one it
  cannot open is refused saying it :data:`~arena.weights.cuda_ipc.NEEDS_BYTES`.
- **A checkpoint load** reads a Hugging Face model directory's safetensors files (one file or an
  index of shards) after checking their headers like any update: names and shapes must match the
  served parameters, dtypes too except that floats are cast to the served float dtype (a float32
  checkpoint for a bfloat16 server); a name may be missing only where the served model ties it to
  one that is present (``save_pretrained`` leaves out tied embeddings).

Buckets of a restarted publisher (a newer ``epoch``) roll the served version back to its
checkpoint's (:mod:`arena.weights.assembler`). A complete update goes to
``deliver(version, state, transport)``; a refusal to
``refuse(version, reason, transport)``. ``transport`` is ``shm``, ``bus``, ``fetch``,
``cuda_ipc`` or ``load``. Nothing here touches the served weights: the caller applies them between batches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors import safe_open

from arena.bus import Actor, BusError, Message
from arena.core.dtypes import BY_SAFETENSORS
from arena.core.limits import WEIGHT_UPDATE
from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import (
    StaleBucket,
    WeightUpdateError,
    as_served,
    check_tensor,
    tensor_specs,
    tied_names,
    view_key,
)
from arena.weights.cuda_ipc import NEEDS_BYTES, IpcImporter, can_open
from arena.weights.publisher import fetch_service
from arena.weights.shm import SharedMemoryReader

log = logging.getLogger("arena.weights")

Deliver = Callable[[int, dict[str, torch.Tensor], str], None]
Refuse = Callable[[int, str, str], None]


class ServedModel(Protocol):
    """What updates are checked against: the served weights and the version they carry
    (an :class:`arena.policies.Policy` is one)."""

    version: int

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """The served parameters (raises NotImplementedError where a backend has none)."""
        ...


class WeightReceiver:
    """Weight updates for ``policy``, served by ``actor`` as ``name``; checked against the
    policy's parameters, never applied here."""

    def __init__(
        self,
        actor: Actor,
        name: str,
        policy: ServedModel,
        *,
        deliver: Deliver,
        refuse: Refuse,
        timeout: float = WEIGHT_UPDATE,
        shm: bool = True,
        device: str | None = None,
        locate: Callable[[str], Any] = str,
    ) -> None:
        """``device``: the served weights' :func:`~arena.weights.cuda_ipc.device_id` (None: not
        a CUDA device), which CUDA IPC offers must name. ``locate``: the model directory a
        ``load``'s ``path`` names on this host (the inference actor's: a model spec such as
        ``smollm2-135m`` is found in this host's cache, where the sender's may differ); called
        in a thread, before the checkpoint is read."""
        self.actor = actor
        self.device = device
        self.ipc = IpcImporter()
        self.name = name
        self.policy = policy
        self.deliver = deliver
        self.refuse = refuse
        self.timeout = timeout
        self.shm = shm
        self.locate = locate
        self.counters: Counter[str] = Counter()
        self.reader = SharedMemoryReader()
        self._assembler: WeightAssembler | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def status(self) -> dict[str, int]:
        assembled = self._assembler.counters if self._assembler else Counter()
        return dict(assembled + self.counters)

    # -- buckets ---------------------------------------------------------------------------
    def on_weights(self, msg: Message) -> None:
        """One ``weights`` bucket, in either form."""
        body = msg.body
        assembler = self._assembler_or_refuse(body)
        if assembler is None:
            return
        if isinstance(body, dict) and "cuda_ipc" in body:
            self._take_ipc(assembler, body)
            return
        ref = body.get("shm") if isinstance(body, dict) else None
        if ref is None:
            self._take(assembler, body, "bus")
        elif self.shm and self.reader.readable(ref):
            self._take(assembler, body, "shm")
        else:
            try:  # an outdated reference is refused here, not fetched first
                assembler.check_fresh(_version(body), _epoch(body))
            except StaleBucket as err:
                self._stale(body, err, "fetch")
                return
            self._spawn(self._fetch(assembler, msg.src, body))

    async def _fetch(self, assembler: WeightAssembler, src: str, body: dict[str, Any]) -> None:
        version, index = _version(body), body.get("bucket")
        self.counters["fetched"] += 1
        try:
            reply = await self.actor.request(
                {"version": version, "bucket": index},
                dst=src,
                service=fetch_service(self.name),
                timeout=self.timeout,
            )
        except BusError as err:
            self.counters["fetch_failed"] += 1
            self.refuse(
                version,
                f"could not fetch bucket {index} of version {version} from {src}: {err}",
                "fetch",
            )
            return
        self._take(assembler, reply.body, "fetch")

    def _take(self, assembler: WeightAssembler, body: Any, transport: str) -> None:
        start = time.monotonic()
        try:
            update = assembler.add(body)
        except StaleBucket as err:
            self._stale(body, err, transport)
            return
        except WeightUpdateError as err:
            self.refuse(_version(body), str(err), transport)
            return
        log.debug(
            "%s bucket %s of version %s checked in %.3fs",
            transport,
            body.get("bucket"),
            body.get("version"),
            time.monotonic() - start,
        )
        if update is not None:
            version, state = update
            self.deliver(version, self._without_tied_copies(state), transport)

    def _take_ipc(self, assembler: WeightAssembler, body: dict[str, Any]) -> None:
        version, offer = _version(body), body["cuda_ipc"]
        try:
            assembler.check_fresh(version, _epoch(body))
        except StaleBucket as err:
            self._stale(body, err, "cuda_ipc")
            return
        if not isinstance(offer, dict) or not can_open(offer, self.device):
            self.counters["ipc_refused"] += 1
            self.refuse(version, f"{self.actor.name} on {self.device} {NEEDS_BYTES}", "cuda_ipc")
            return
        try:
            state = self.ipc.take(offer, self.policy.state_dict())
            since = body.get("since")
            update = assembler.complete(
                version, _epoch(body), since if isinstance(since, int) else None, state
            )
        except WeightUpdateError as err:
            self.refuse(version, str(err), "cuda_ipc")
            return
        self.deliver(update[0], self._without_tied_copies(update[1]), "cuda_ipc")

    def _without_tied_copies(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Drop a tied name whose update is the very view its target's is (a shared-memory file
        stores tied tensors once): copying the target sets both, and copying twice costs time."""
        for alias, target in tied_names(self.policy.state_dict()).items():
            if (
                alias in state
                and target in state
                and view_key(state[alias]) == view_key(state[target])
            ):
                del state[alias]
        return state

    def _stale(self, body: Any, err: StaleBucket, transport: str) -> None:
        # One refusal per stale update, not one per bucket: its first bucket speaks for it.
        if isinstance(body, dict) and body.get("bucket") == 0:
            self.refuse(_version(body), str(err), transport)

    def _assembler_or_refuse(self, body: Any) -> WeightAssembler | None:
        if self._assembler is None:
            try:
                expected = self.policy.state_dict()
            except NotImplementedError as err:
                self.counters["rejected"] += 1
                self.refuse(_version(body), str(err), "bus")
                return None
            self._assembler = WeightAssembler(
                expected, self.timeout, self.reader, self.policy.separable_weights()
            )
            self._assembler.last_version = self.policy.version
        return self._assembler

    # -- checkpoint loads ------------------------------------------------------------------
    def on_load(self, body: Mapping[str, Any]) -> None:
        """``{"command": "load", "path": dir or model spec, "version": int}``: located, read and
        checked in a thread."""
        self._spawn(self._load(body))

    async def _load(self, body: Mapping[str, Any]) -> None:
        version, path = body.get("version"), body.get("path")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            self.refuse(
                _version(body), f"load needs an integer 'version' >= 0, got {version!r}", "load"
            )
            return
        if not isinstance(path, str) or not path:
            self.refuse(version, f"load needs a 'path' to a model directory, got {path!r}", "load")
            return
        try:
            where = str(await asyncio.to_thread(self.locate, path))
            state = await asyncio.to_thread(read_checkpoint, where, self.policy.state_dict())
        except Exception as err:  # a bad path, a bad file, a mismatch: all refusals
            self.counters["load_rejected"] += 1
            self.refuse(version, f"cannot load {path}: {err}", "load")
            return
        self.counters["loads"] += 1
        self.deliver(version, state, "load")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def read_checkpoint(path: str, expected: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weights of the Hugging Face model directory ``path``, checked against ``expected``
    (every header first, so a mismatch costs no tensor reads). Raises WeightUpdateError."""
    root = Path(path)
    if not root.is_dir():
        raise WeightUpdateError(f"no directory {path}")
    index = root / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (root / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise WeightUpdateError(f"{path} has neither model.safetensors nor {index.name}")
    want = tensor_specs(expected)
    handles = [safe_open(root / f, framework="pt") for f in files]
    where: dict[str, Any] = {}
    for handle in handles:
        for name in handle.keys():  # noqa: SIM118 -- safe_open is not a mapping
            info = handle.get_slice(name)
            check_tensor(want, name, _dtype_name(info.get_dtype()), info.get_shape())
            if name in where:
                raise WeightUpdateError(f"{name} appears in two shards")
            where[name] = handle
    missing = (
        set(want)
        - set(where)
        - {a for a, target in tied_names(expected).items() if target in where}
    )
    if missing:
        raise WeightUpdateError(f"{len(missing)} tensors missing, e.g. {sorted(missing)[0]}")
    return {name: as_served(handle.get_tensor(name), want[name]) for name, handle in where.items()}


def _dtype_name(code: str) -> str:
    """The dtype name of a safetensors code (an unknown code stays as it is, and is refused)."""
    known = BY_SAFETENSORS.get(code)
    return known.name if known is not None else code


def _epoch(body: Any) -> int | None:
    """The publisher's epoch a bucket names (None: none, or not an integer; the assembler
    refuses the latter when it checks the bucket)."""
    epoch = body.get("epoch") if isinstance(body, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def _version(body: Any) -> int:
    try:
        return int(body["version"])
    except Exception:
        return -1
