"""Same-host weight transport: each version written once into a shared-memory file.

A publisher writes a whole state dict into ``<dir>/arena-weights-<name>-<pid>-<token>-v<version>
.safetensors`` (``dir`` is ``/dev/shm``: memory, not disk) and sends only small reference buckets
over the bus (:mod:`arena.weights.buckets`). A receiver on the same host maps the file read-only and
copies from it into its parameters: the bytes cross no socket.

- **Layout.** Safetensors (8-byte little-endian header length, JSON header, tensor bytes), so the
  file describes itself and ``safetensors.torch.load_file`` reads it. Tensors that are views of
  the same memory (tied embeddings) are written and checksummed once; the header's metadata
  and the reference buckets name the aliases.
- **One file per version, written in order.** A version's file (named after it) has its full
  size from the start; the header and each bucket's bytes are written in order, and a bucket's
  reference goes out only once its bytes are in place. So receivers check bucket 0 while bucket
  1 is being written, and nothing reads a part that is not yet written (a reader trusts only
  what a reference names, and checks its checksum). A writer that dies midway leaves buckets
  that were never announced: its update stays partial and is refused.
- **Reuse.** Fresh shared memory costs about as much to allocate as the bytes cost to copy, so a
  writer renames its latest file to the next version and rewrites it in place when no receiver
  holds it: receivers hold a shared ``flock`` from mapping a file until they are done with its
  update, and the writer reuses a file only after taking an exclusive lock on it without
  waiting. Otherwise it allocates a new file and unlinks the old one (a receiver that mapped it
  keeps reading it: an unlinked file lives as long as its mappings), also when the same version
  is written again (re-sent for an actor that joined late) and the new file takes the old name.
- **Cleanup.** A writer keeps only its latest file and removes it when closed. While alive it
  holds a shared ``flock`` on it, so a later writer can remove the files of a writer that died
  (no lock held by anyone) instead of leaking their memory.
- **Host id.** ``<boot id>:<device number of the directory's filesystem>``: two processes see the
  same files exactly when they run on one kernel and the directory is one filesystem for both
  (containers with private /dev/shm mounts differ). A receiver whose id differs, or that cannot
  open the file, gets the bytes another way (:mod:`arena.weights.publisher`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import mmap
import os
import re
import secrets
import socket
import stat
import time
import weakref
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arena.core.dtypes import DTYPES
from arena.weights.buckets import Bucket, dtype_name, tensor_bytes, tensor_nbytes, tied_names

log = logging.getLogger("arena.weights")

SHM_DIR = "/dev/shm"
PREFIX = "arena-weights-"
SUFFIX = ".safetensors"
STALE_AFTER_S = 60.0
"""A writer's unlocked file older than this is an orphan (its writer died): removed."""
_FILE_NAME = re.compile(r"^arena-weights-[\w.-]+\.safetensors$")
_CHUNK = 4 << 20
"""Bytes written and checksummed together, so the checksum reads them while they are cached."""


@functools.cache
def _boot_id() -> str:
    for path in ("/proc/sys/kernel/random/boot_id", "/etc/machine-id"):
        with contextlib.suppress(OSError):
            return Path(path).read_text().strip()
    return socket.gethostname()


def host_id(directory: str | os.PathLike[str]) -> str:
    """Names the filesystem holding ``directory`` as seen from this kernel (raises OSError)."""
    return f"{_boot_id()}:{os.stat(directory).st_dev}"


def is_writable_dir(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` exists and this process may create files in it."""
    return os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK)


@dataclass(frozen=True)
class SharedWeightsFile:
    """Where one version's tensors lie: what a reference bucket names."""

    version: int
    path: str
    size: int
    host: str
    offsets: dict[str, int]
    """Tensor name -> byte offset in the file (aliases share their target's)."""
    aliases: dict[str, str]
    """Tied names stored once: name -> the name whose bytes it shares."""

    def ref(self) -> dict[str, Any]:
        return {"path": self.path, "host": self.host, "size": self.size}


class SharedMemoryWriter:
    """Writes versions of one policy's weights into ``directory``; keeps only the latest."""

    def __init__(self, name: str, directory: str | os.PathLike[str] = SHM_DIR) -> None:
        self.directory = Path(directory)
        safe = re.sub(r"[^\w.-]", "_", name)
        self.stem = f"{PREFIX}{safe}-{os.getpid()}-{secrets.token_hex(4)}"
        self._current: tuple[Path, int] | None = None
        """The latest file and the descriptor holding its lock."""

    def write(
        self,
        buckets: list[Bucket],
        version: int,
        on_bucket: Callable[[SharedWeightsFile, int, int], None],
    ) -> SharedWeightsFile:
        """Write ``buckets`` into a file, calling ``on_bucket(file, index, checksum)`` as soon as
        each bucket's bytes are in place (so receivers read bucket 0 while bucket 1 is being
        written). Raises OSError (e.g. no space left); buckets announced before it stay valid."""
        offsets, aliases = _layout(buckets)
        header = _header(buckets, offsets, aliases, version)
        size = len(header) + sum(
            tensor_nbytes(t) for b in buckets for n, t in b if n not in aliases
        )
        path = self.directory / f"{self.stem}-v{version}{SUFFIX}"
        fd = self._reuse(path, size)
        if fd is None:
            if self._current is not None and self._current[0] == path:
                # The same version again (a re-publish) while a receiver still maps its file: it
                # keeps that mapping, and the name goes to the new file.
                self._retire()
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._retire()
            # Full size first: a receiver maps the whole file at the first bucket. Unwritten
            # parts are holes, and nothing reads them before they are written and announced.
            os.ftruncate(fd, size)
        self._current = (path, fd)
        os.lseek(fd, 0, os.SEEK_SET)
        file = SharedWeightsFile(
            version,
            str(path),
            size,
            host_id(self.directory),
            {n: len(header) + off for n, off in offsets.items()},
            aliases,
        )
        _write_all(fd, memoryview(header))
        for index, bucket in enumerate(buckets):
            crc = 0
            for name, tensor in bucket:
                if name not in aliases:  # an alias's bytes are its target's, checked there
                    crc = _write_all(fd, memoryview(tensor_bytes(tensor)), crc)
            on_bucket(file, index, crc)
        self._sweep()
        return file

    def close(self) -> None:
        """Remove the latest file (receivers that mapped it keep their mapping)."""
        self._retire()

    def _reuse(self, path: Path, size: int) -> int | None:
        """The latest file, renamed to ``path``, if it has ``size`` bytes and no reader holds it.

        Allocating fresh shared memory costs about as much as copying the bytes in, so a file
        is rewritten in place when that is safe: a receiver holds a shared lock on a file from
        the moment it maps it until it is done with the update, and this writer's exclusive
        lock (taken without waiting, then given back) proves that none does. A receiver that
        opens the old name after that finds it gone; one that opened it just before and locks
        it afterwards reads the new bytes under the old checksums, and refuses them.
        """
        if self._current is None:
            return None
        old, fd = self._current
        if os.fstat(fd).st_size != size:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a receiver still reads it: allocate a new file
            return None
        try:
            os.rename(old, path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_SH)
        return fd

    def _retire(self) -> None:
        if self._current is not None:
            path, fd = self._current
            self._current = None
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)

    def _sweep(self) -> None:
        """Remove other writers' orphans: files nobody holds a lock on, not touched lately."""
        now = time.time()
        for item in os.scandir(self.directory):
            if not item.name.startswith(PREFIX) or item.name.startswith(self.stem):
                continue
            with contextlib.suppress(OSError):
                if now - item.stat(follow_symlinks=False).st_mtime < STALE_AFTER_S:
                    continue
                fd = os.open(item.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: alive
                    os.unlink(item.path)
                    log.info("removed orphaned weights file %s", item.path)
                finally:
                    os.close(fd)


class SharedMemoryReader:
    """Maps reference files read-only for a receiver; remembers the last one it mapped.

    Each mapping holds a shared lock on its file until no tensor views it any more, so the
    writer does not reuse the file while an update read from it may still be applied.
    """

    def __init__(self) -> None:
        self._last: tuple[str, np.ndarray] | None = None

    def readable(self, ref: Mapping[str, Any]) -> bool:
        """Whether this process can map the file ``ref`` names (mapping it if so)."""
        try:
            self.open(ref)
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.info("cannot map %s here (%s); the bytes will be fetched", ref, err)
            return False
        return True

    def open(self, ref: Mapping[str, Any]) -> np.ndarray:
        """The bytes of the file ``ref`` names; raises unless it is an arena weights file on
        this host's filesystem, of the announced size."""
        path = str(ref["path"])
        if self._last is not None and self._last[0] == path:
            return self._last[1]
        if not _FILE_NAME.match(os.path.basename(path)):
            raise ValueError(f"{path!r} is not an arena weights file")
        if ref["host"] != host_id(os.path.dirname(path)):
            raise ValueError(f"{path} lies on another host ({ref['host']})")
        data = map_readonly(path, int(ref["size"]), lock=True)
        self._last = (path, data)
        return data

    def forget(self) -> None:
        """Drop the remembered mapping (it is unmapped once no tensor views it)."""
        self._last = None


def map_readonly(
    path: str | os.PathLike[str], size: int | None = None, lock: bool = False
) -> np.ndarray:
    """A regular file's bytes, mapped read-only. Pages are faulted in as they are read, never
    ahead: a file being written has holes where its later buckets go.

    With ``lock``, a shared ``flock`` is held on the file (raises BlockingIOError while its
    writer holds it exclusively) until the returned array and every view of it are gone.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if lock:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if size is not None and info.st_size != size:
            raise ValueError(f"{path} has {info.st_size} bytes, expected {size}")
        if info.st_size == 0:
            raise ValueError(f"{path} is empty")
        data = np.frombuffer(
            mmap.mmap(fd, info.st_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ), np.uint8
        )
    except BaseException:
        os.close(fd)
        raise
    if lock:
        weakref.finalize(data, os.close, fd)  # closing the descriptor releases the lock
    else:
        os.close(fd)
    return data


def duplicate_names(state: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """Names whose tensor holds the same bytes as an earlier name's, mapped to that name: tied
    weights, also where an export copied them apart (a learner's CPU copies do)."""
    aliases = tied_names(state)
    unique: dict[tuple[Any, ...], list[tuple[torch.Tensor, str]]] = {}
    for name, tensor in state.items():
        if name in aliases or not tensor.numel():
            continue
        flat = _words(tensor)
        group = unique.setdefault((tensor.dtype, tuple(tensor.shape), tensor.device), [])
        # Cheap checks first: most same-shaped tensors (one per layer) differ in their first bytes.
        same = (n for u, n in group if torch.equal(u[:64], flat[:64]) and torch.equal(u, flat))
        target = next(same, None)
        if target is None:
            group.append((flat, name))
        else:
            aliases[name] = target
    return aliases


def _words(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's bytes as a flat integer tensor, in 8-byte words where they fit (comparing
    words is several times faster than comparing bytes)."""
    flat = tensor.detach().reshape(-1).view(torch.uint8)
    try:
        return flat.view(torch.int64)
    except RuntimeError:  # a size or offset that is not a multiple of 8
        return flat


def _layout(buckets: list[Bucket]) -> tuple[dict[str, int], dict[str, str]]:
    """Offsets in the data section, in bucket order, and aliases (name -> the name whose bytes
    it shares)."""
    aliases = duplicate_names({name: tensor for bucket in buckets for name, tensor in bucket})
    offsets: dict[str, int] = {}
    end = 0
    for bucket in buckets:
        for name, tensor in bucket:
            if name not in aliases:
                offsets[name] = end
                end += tensor_nbytes(tensor)
    return offsets | {name: offsets[target] for name, target in aliases.items()}, aliases


def _header(
    buckets: list[Bucket], offsets: dict[str, int], aliases: dict[str, str], version: int
) -> bytes:
    entries: dict[str, Any] = {
        "__metadata__": {
            "format": "pt",
            "arena_version": str(version),
            "arena_aliases": json.dumps(aliases),
        }
    }
    for bucket in buckets:
        for name, tensor in bucket:
            if name in aliases:
                continue
            known = DTYPES.get(dtype_name(tensor.dtype))
            if known is None:
                raise ValueError(f"{name}: safetensors has no dtype {tensor.dtype}")
            entries[name] = {
                "dtype": known.safetensors,
                "shape": list(tensor.shape),
                "data_offsets": [offsets[name], offsets[name] + tensor_nbytes(tensor)],
            }
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)  # tensor data starts 8-byte aligned
    return len(text).to_bytes(8, "little") + text


def _write_all(fd: int, data: memoryview, crc: int = 0) -> int:
    """Write ``data`` in chunks, each checksummed right after it is written; returns the crc."""
    data = data.cast("B")
    for start in range(0, len(data), _CHUNK):
        chunk = data[start : start + _CHUNK]
        while chunk:
            written = os.write(fd, chunk)
            crc = zlib.crc32(chunk[:written], crc)
            chunk = chunk[written:]
    return crc
