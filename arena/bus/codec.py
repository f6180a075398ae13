"""The wire codec: ``[header, *binary frames]``, msgpack headers, numpy arrays as raw frames.

Layout of one message (a ZeroMQ multipart message)::

    frame 0   msgpack map: v, type, id, src, dst, service, topic, reply_to, ts, body, frames
    frame 1.. raw bytes of each numpy array / Blob in the body, in order

``body`` is itself msgpack bytes, so a broker can route on the header without unpacking the body.
Inside the body, an array is replaced by a msgpack ext reference (code 1, frame index) and its
dtype and shape are listed in the header's ``frames``; the array's memory is handed to ZeroMQ
without a copy and decoded with ``np.frombuffer`` (no copy either). Lists of numbers are never
used for tokens or tensors: a list costs about 1 ms per 8k tokens, a frame about 10 µs.

No pickle: only msgpack types, numpy arrays of a fixed set of dtypes, and :class:`Blob`.
Everything inbound is validated (:mod:`arena.bus.headers` says what a valid header is); anything
wrong raises :class:`ProtocolError` with a code that the broker or actor turns into an ``error``
reply and a counter.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from arena.bus.errors import ProtocolError
from arena.bus.headers import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    decode_header,
)
from arena.core.dtypes import DTYPES

_EXT_ARRAY = 1
_EXT_BLOB = 2
_ALLOWED_DTYPES = frozenset({*DTYPES, "bytes"})
"""Frame dtypes: the project's dtype table, plus ``bytes`` for :class:`Blob` frames."""
# dtype.name costs ~1 µs and np.dtype(name) ~0.2 µs, both on the 8k-token path: cache them.
# Only native byte order is listed, so a big-endian array misses the cache and gets converted.
_DTYPE_NAMES: dict[np.dtype, str] = {np.dtype(name): name for name in DTYPES if name != "bfloat16"}
_DTYPES: dict[str, np.dtype] = {name: dtype for dtype, name in _DTYPE_NAMES.items()}
_DTYPES["bfloat16"] = np.dtype(np.uint16)  # numpy has no bfloat16: raw 16-bit words; torch views it


@dataclass(frozen=True, slots=True)
class Blob:
    """Raw bytes that travel as their own zero-copy frame instead of inside msgpack."""

    data: bytes | bytearray | memoryview


@dataclass(slots=True)
class Message:
    """A decoded message. ``body`` is unpacked on first access (a broker never needs it)."""

    type: str
    id: str
    src: str
    dst: str | None = None
    service: str | None = None
    topic: str | None = None
    reply_to: str | None = None
    ts: float = 0.0
    raw_body: bytes = b""
    frames: list[Any] = field(default_factory=list)
    frame_specs: list[Any] = field(default_factory=list)
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    _body: Any = None
    _decoded: bool = False

    @property
    def body(self) -> Any:
        if not self._decoded:
            self._body = decode_body(self.raw_body, self.frames, self.frame_specs)
            self._decoded = True
        return self._body


_ID_PREFIX = uuid.uuid4().hex[:8]
_id_counter = itertools.count()


def new_id() -> str:
    """A message id unique per sender: a random per-process prefix and a counter (uuid4 is slow)."""
    return f"{_ID_PREFIX}{next(_id_counter):x}"


def _ref(code: int, index: int) -> msgpack.ExtType:
    return msgpack.ExtType(code, index.to_bytes(4, "little"))


# References to the first frames, built once: an ExtType costs ~0.5 µs to make.
_ARRAY_REFS = [_ref(_EXT_ARRAY, i) for i in range(64)]


def _array_ref(index: int) -> msgpack.ExtType:
    return _ARRAY_REFS[index] if index < 64 else _ref(_EXT_ARRAY, index)


class _Encoder(threading.local):
    """Reusable msgpack packers (cheaper than ``packb`` per call); one per thread."""

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self.specs: list[list[Any]] = []
        self.body_packer = msgpack.Packer(default=self._pack_special, use_bin_type=True)
        self.header_packer = msgpack.Packer(use_bin_type=True)

    def _pack_special(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            name = _DTYPE_NAMES.get(obj.dtype)
            if name is not None and obj.flags.c_contiguous and obj.size:
                data: Any = memoryview(obj).cast("B")  # zero-copy; cheaper than .view(np.uint8)
            else:
                obj, name = _wire_array(obj)
                data = obj.reshape(-1).view(np.uint8).data if obj.size else b""
            self.specs.append([name, list(obj.shape)])
            frames = self.frames
            frames.append(data)
            return _array_ref(len(frames))
        if isinstance(obj, Blob):
            self.specs.append(["bytes", [len(obj.data)]])
            self.frames.append(obj.data)
            return _ref(_EXT_BLOB, len(self.frames))
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, (tuple, set, frozenset)):
            return list(obj)
        raise TypeError(f"cannot send {type_name(obj)} on the bus (no pickle); use msgpack types")


_encoder = _Encoder()


def _wire_array(arr: np.ndarray) -> tuple[np.ndarray, str]:
    """A C-contiguous, native-byte-order copy of ``arr`` if it needs one, and its dtype name."""
    arr = np.ascontiguousarray(arr)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    name = arr.dtype.name
    if name not in _ALLOWED_DTYPES or name == "bytes":
        raise TypeError(f"cannot send a numpy array of dtype {name} on the bus")
    return arr, name


def encode(
    type: str,
    body: Any = None,
    *,
    src: str,
    dst: str | None = None,
    service: str | None = None,
    topic: str | None = None,
    reply_to: str | None = None,
    msg_id: str | None = None,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> tuple[str, list[Any]]:
    """Encode a message; returns ``(id, frames)`` ready for ``send_multipart(copy=False)``."""
    if type not in MESSAGE_TYPES:
        raise ValueError(f"unknown message type {type!r}; expected one of {sorted(MESSAGE_TYPES)}")
    enc = _encoder
    frames: list[Any] = []
    specs: list[list[Any]] = []
    enc.frames, enc.specs = frames, specs
    try:
        packed_body = enc.body_packer.pack(body)
    except Exception:
        enc.body_packer.reset()  # a failed pack leaves partial bytes in the packer's buffer
        raise
    msg_id = msg_id or new_id()
    header = enc.header_packer.pack(
        {
            "v": PROTOCOL_VERSION,
            "type": type,
            "id": msg_id,
            "src": src,
            "dst": dst,
            "service": service,
            "topic": topic,
            "reply_to": reply_to,
            "ts": time.time(),
            "body": packed_body,
            "frames": specs,
        }
    )
    if frames:
        size = len(header) + sum(f.nbytes if isinstance(f, memoryview) else len(f) for f in frames)
        if size > max_bytes:
            raise ValueError(f"message of {size} bytes exceeds the limit of {max_bytes} bytes")
        return msg_id, [header, *frames]
    if len(header) > max_bytes:
        raise ValueError(f"message of {len(header)} bytes exceeds the limit of {max_bytes} bytes")
    return msg_id, [header]


def type_name(obj: Any) -> str:
    return type(obj).__module__ + "." + type(obj).__qualname__


def decode(frames: list[Any], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Message:
    """Decode and validate the header of a multipart message. Raises :class:`ProtocolError`."""
    return message_from_header(decode_header(frames, max_bytes), frames, max_bytes)


def message_from_header(
    h: dict[str, Any], frames: list[Any], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Message:
    """The :class:`Message` of ``frames``, whose header :func:`decode_header` has validated."""
    return Message(
        h["type"],
        h["id"],
        h["src"],
        h["dst"],
        h["service"],
        h["topic"],
        h["reply_to"],
        float(h["ts"]),
        h["body"],
        frames[1:],
        h["frames"],
        max_bytes,
    )


def _frame_array(frame: Any, spec: Any, index: int) -> Any:
    if not (type(spec) is list and len(spec) == 2 and type(spec[1]) is list):
        raise ProtocolError("malformed", f"frame {index} descriptor must be [dtype, shape]")
    dtype_name, shape = spec
    for d in shape:
        if type(d) is not int or d < 0:
            raise ProtocolError("malformed", f"frame {index} has invalid shape {shape!r}")
    buffer = frame if type(frame) is bytes else getattr(frame, "buffer", frame)  # zmq.Frame
    if dtype_name == "bytes":
        if len(shape) != 1 or len(buffer) != shape[0]:
            raise ProtocolError("malformed", f"blob frame {index} length does not match")
        return bytes(buffer)
    dtype = _DTYPES.get(dtype_name) if type(dtype_name) is str else None
    if dtype is None:
        raise ProtocolError("malformed", f"frame {index} has unsupported dtype {dtype_name!r}")
    nbytes = buffer.nbytes if type(buffer) is memoryview else len(buffer)
    expected = math.prod(shape) * dtype.itemsize
    if nbytes != expected:
        raise ProtocolError(
            "malformed", f"frame {index} holds {nbytes} bytes, {dtype_name}{shape} needs {expected}"
        )
    array = np.frombuffer(buffer, dtype=dtype)
    return array if len(shape) == 1 else array.reshape(shape)


def _no_frames_hook(code: int, data: bytes) -> Any:
    if code not in (_EXT_ARRAY, _EXT_BLOB) or len(data) != 4:
        raise ProtocolError("malformed", f"unknown msgpack extension {code}")
    raise ProtocolError(
        "malformed", f"body references missing frame {int.from_bytes(data, 'little') - 1}"
    )


def decode_body(raw_body: bytes, frames: list[Any], specs: list[Any]) -> Any:
    """Unpack a body, resolving array/blob references to its frames. Raises ProtocolError."""

    def ext_hook(code: int, data: bytes) -> Any:
        if code not in (_EXT_ARRAY, _EXT_BLOB) or len(data) != 4:
            raise ProtocolError("malformed", f"unknown msgpack extension {code}")
        index = int.from_bytes(data, "little") - 1
        if not 0 <= index < len(frames):
            raise ProtocolError("malformed", f"body references missing frame {index}")
        return _frame_array(frames[index], specs[index], index)

    try:
        # Most bodies carry no frames: a shared hook saves building a closure per message.
        hook = ext_hook if frames else _no_frames_hook
        return msgpack.unpackb(raw_body, raw=False, ext_hook=hook, strict_map_key=False)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(
            "malformed", f"body is not valid msgpack ({type(exc).__name__})"
        ) from None
