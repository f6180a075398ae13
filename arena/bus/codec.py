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
Everything inbound is validated; anything wrong raises :class:`ProtocolError` with a code that
the broker or actor turns into an ``error`` reply and a counter.
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

PROTOCOL_VERSION = 1
MESSAGE_TYPES = frozenset(
    {"register", "heartbeat", "request", "reply", "error", "episode", "weights", "control"}
)
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Soft limit on a whole message (header and frames); over it, an ``error`` reply."""

_EXT_ARRAY = 1
_EXT_BLOB = 2
_ALLOWED_DTYPES = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
     "float16", "float32", "float64", "bfloat16", "bytes"}
)  # fmt: skip
_HEADER_FIELDS: dict[str, tuple[type, ...]] = {
    "v": (int,),
    "type": (str,),
    "id": (str,),
    "src": (str,),
    "dst": (str, type(None)),
    "service": (str, type(None)),
    "topic": (str, type(None)),
    "reply_to": (str, type(None)),
    "ts": (float, int),
    "body": (bytes,),
    "frames": (list,),
}
_HEADER_KEYS = frozenset(_HEADER_FIELDS)
# Fields each type needs beyond the common ones; body schemas below.
_ROUTE_RULES: dict[str, tuple[str, ...]] = {
    "request": ("dst|service",),
    "reply": ("dst", "reply_to"),
    "error": ("dst", "reply_to"),
    "episode": ("dst|service",),
    "weights": ("dst|service|topic",),
    "control": ("dst|service|topic",),
}
BODY_SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    "register": {"name": (str,), "kind": (str,), "services": (list,), "host": (str,),
                 "pid": (int,), "topics": (list,)},
    "error": {"code": (str,), "message": (str,)},
}  # fmt: skip


class ProtocolError(Exception):
    """An inbound message that breaks the protocol. ``code`` names the kind of fault."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


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


class _Encoder(threading.local):
    """Reusable msgpack packers (cheaper than ``packb`` per call); one per thread."""

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self.specs: list[list[Any]] = []
        self.body_packer = msgpack.Packer(default=self._pack_special, use_bin_type=True)
        self.header_packer = msgpack.Packer(use_bin_type=True)

    def _pack_special(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            arr = np.ascontiguousarray(obj)
            self.specs.append([arr.dtype.name, list(arr.shape)])
            self.frames.append(arr.reshape(-1).view(np.uint8).data if arr.size else b"")
            return msgpack.ExtType(_EXT_ARRAY, len(self.frames).to_bytes(4, "little"))
        if isinstance(obj, Blob):
            self.specs.append(["bytes", [len(obj.data)]])
            self.frames.append(obj.data)
            return msgpack.ExtType(_EXT_BLOB, len(self.frames).to_bytes(4, "little"))
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, (tuple, set, frozenset)):
            return list(obj)
        raise TypeError(f"cannot send {type_name(obj)} on the bus (no pickle); use msgpack types")


_encoder = _Encoder()


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
        {"v": PROTOCOL_VERSION, "type": type, "id": msg_id, "src": src, "dst": dst,
         "service": service, "topic": topic, "reply_to": reply_to, "ts": time.time(),
         "body": packed_body, "frames": specs}
    )  # fmt: skip
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
    if not frames:
        raise ProtocolError("malformed", "empty message")
    size = sum(len(f) for f in frames)
    if size > max_bytes:
        raise ProtocolError("too_large", f"message of {size} bytes exceeds {max_bytes} bytes")
    try:
        header = msgpack.unpackb(frames[0], raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise ProtocolError("malformed", f"header is not msgpack ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed", f"header must be a map, got {type(header).__name__}")
    version = header.get("v")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            "bad_version", f"protocol version {version!r}, this peer speaks {PROTOCOL_VERSION}"
        )
    if header.keys() != _HEADER_KEYS:
        missing = sorted(_HEADER_KEYS - header.keys())
        extra = sorted(map(str, header.keys() - _HEADER_KEYS))
        raise ProtocolError("malformed", f"header lacks fields {missing} or has unknown {extra}")
    for name, types in _HEADER_FIELDS.items():
        if type(header[name]) not in types:
            raise ProtocolError(
                "malformed", f"header field {name!r} has type {type(header[name]).__name__}"
            )
    mtype = header["type"]
    if mtype not in MESSAGE_TYPES:
        raise ProtocolError("unknown_type", f"unknown message type {mtype!r}")
    for rule in _ROUTE_RULES.get(mtype, ()):
        if not any(header[name] for name in rule.split("|")):
            raise ProtocolError("malformed", f"a {mtype} message needs {rule.replace('|', ' or ')}")
    specs = header["frames"]
    if len(specs) != len(frames) - 1:
        raise ProtocolError(
            "malformed", f"header lists {len(specs)} frames but {len(frames) - 1} arrived"
        )
    return Message(
        type=mtype, id=header["id"], src=header["src"], dst=header["dst"],
        service=header["service"], topic=header["topic"], reply_to=header["reply_to"],
        ts=float(header["ts"]), raw_body=header["body"], frames=list(frames[1:]),
        frame_specs=specs, max_bytes=max_bytes,
    )  # fmt: skip


def _frame_array(frame: Any, spec: Any, index: int) -> Any:
    if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[1], list)):
        raise ProtocolError("malformed", f"frame {index} descriptor must be [dtype, shape]")
    dtype_name, shape = spec
    if dtype_name not in _ALLOWED_DTYPES:
        raise ProtocolError("malformed", f"frame {index} has unsupported dtype {dtype_name!r}")
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ProtocolError("malformed", f"frame {index} has invalid shape {shape!r}")
    buffer = frame.buffer if hasattr(frame, "buffer") else frame
    if dtype_name == "bytes":
        if len(shape) != 1 or len(buffer) != shape[0]:
            raise ProtocolError("malformed", f"blob frame {index} length does not match")
        return bytes(buffer)
    dtype = _dtype(dtype_name)
    expected = math.prod(shape) * dtype.itemsize
    if len(buffer) != expected:
        raise ProtocolError(
            "malformed", f"frame {index} holds {len(buffer)} bytes, {dtype_name}{shape} needs {expected}"
        )
    return np.frombuffer(buffer, dtype=dtype).reshape(shape)


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        # numpy has no bfloat16: carry it as raw 16-bit words; torch views it back.
        return np.dtype(np.uint16)
    return np.dtype(name)


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
        return msgpack.unpackb(raw_body, raw=False, ext_hook=ext_hook, strict_map_key=False)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError("malformed", f"body is not valid msgpack ({type(exc).__name__})") from None


def validate_body(mtype: str, body: Any) -> None:
    """Check a body against its type's schema (types without one accept any body)."""
    schema = BODY_SCHEMAS.get(mtype)
    if schema is None:
        return
    if not isinstance(body, dict):
        raise ProtocolError("schema", f"{mtype} body must be a map, got {type(body).__name__}")
    for name, types in schema.items():
        if name not in body:
            raise ProtocolError("schema", f"{mtype} body lacks field {name!r}")
        if not isinstance(body[name], types):
            raise ProtocolError(
                "schema", f"{mtype} body field {name!r} has type {type(body[name]).__name__}"
            )
