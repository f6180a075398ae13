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

from arena.core.dtypes import DTYPES

PROTOCOL_VERSION = 1
MESSAGE_TYPES = frozenset(
    {"register", "heartbeat", "request", "reply", "error", "episode", "weights", "control"}
)
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Soft limit on a whole message (header and frames); over it, an ``error`` reply."""

_EXT_ARRAY = 1
_EXT_BLOB = 2
_ALLOWED_DTYPES = frozenset({*DTYPES, "bytes"})
"""Frame dtypes: the project's dtype table, plus ``bytes`` for :class:`Blob` frames."""
# dtype.name costs ~1 µs and np.dtype(name) ~0.2 µs, both on the 8k-token path: cache them.
# Only native byte order is listed, so a big-endian array misses the cache and gets converted.
_DTYPE_NAMES: dict[np.dtype, str] = {np.dtype(name): name for name in DTYPES if name != "bfloat16"}
_DTYPES: dict[str, np.dtype] = {name: dtype for dtype, name in _DTYPE_NAMES.items()}
_DTYPES["bfloat16"] = np.dtype(np.uint16)  # numpy has no bfloat16: raw 16-bit words; torch views it
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
    "register": {
        "name": (str,),
        "kind": (str,),
        "services": (list,),
        "host": (str,),
        "pid": (int,),
        "topics": (list,),
    },
    "error": {"code": (str,), "message": (str,)},
}


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


def decode_header(frames: list[Any], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> dict[str, Any]:
    """Validate a multipart message and return its header map; the broker's hot path.

    One expression checks the common case (a correct header); only a message that fails it
    goes through :func:`header_fault`, which finds and names the fault.
    """
    if len(frames) == 1:
        size = len(frames[0])
    elif frames:
        size = sum(f.nbytes if type(f) is memoryview else len(f) for f in frames)
    else:
        raise ProtocolError("malformed", "empty message")
    if size > max_bytes:
        raise ProtocolError("too_large", f"message of {size} bytes exceeds {max_bytes} bytes")
    try:
        h = _unpack_header(frames[0])
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise ProtocolError("malformed", f"header is not msgpack ({type(exc).__name__})") from None
    try:
        ok = (
            type(h) is dict
            and len(h) == _N_HEADER_FIELDS
            and h["v"] == PROTOCOL_VERSION
            and type(h["v"]) is int
            and type(h["type"]) is str
            and type(h["id"]) is str
            and type(h["src"]) is str
            and type(h["dst"]) in _STR_OR_NONE
            and type(h["service"]) in _STR_OR_NONE
            and type(h["topic"]) in _STR_OR_NONE
            and type(h["reply_to"]) in _STR_OR_NONE
            and type(h["ts"]) in _NUMBER
            and type(h["body"]) is bytes
            and type(h["frames"]) is list
            and len(h["frames"]) == len(frames) - 1
        )
    except KeyError:
        ok = False
    if not ok:
        _reject_header(h, len(frames) - 1)
    mtype = h["type"]
    if mtype == "request" or mtype == "episode":
        ok = bool(h["dst"] or h["service"])
    elif mtype == "reply" or mtype == "error":
        ok = bool(h["dst"] and h["reply_to"])
    elif mtype not in MESSAGE_TYPES:
        _reject_header(h, len(frames) - 1)
    elif mtype != "register" and mtype != "heartbeat":  # weights, control
        ok = bool(h["dst"] or h["service"] or h["topic"])
    if not ok:
        _reject_header(h, len(frames) - 1)
    return h


_N_HEADER_FIELDS = len(_HEADER_FIELDS)
_STR_OR_NONE = (str, type(None))
_NUMBER = (float, int)


# msgpack >= 1.0 (a requirement) unpacks with raw=False, strict_map_key=True and use_list=True by
# default, which is what a header needs; passing them again costs ~0.2 µs per message.
_unpack_header = msgpack.unpackb


def _reject_header(header: Any, n_frames: int) -> None:
    # If the fast check and header_fault ever disagreed, refusing is the safe side.
    raise header_fault(header, n_frames) or ProtocolError("malformed", "invalid header")


def header_fault(header: Any, n_frames: int) -> ProtocolError | None:
    """What is wrong with a header followed by ``n_frames`` binary frames, or None.

    The reference statement of the header rules; :func:`decode_header` checks the same rules
    faster and asks this function only to name a fault.
    """
    if not isinstance(header, dict):
        return ProtocolError("malformed", f"header must be a map, got {type(header).__name__}")
    version = header.get("v")
    if version != PROTOCOL_VERSION:
        return ProtocolError(
            "bad_version", f"protocol version {version!r}, this peer speaks {PROTOCOL_VERSION}"
        )
    if header.keys() != _HEADER_KEYS:
        missing = sorted(_HEADER_KEYS - header.keys())
        extra = sorted(map(str, header.keys() - _HEADER_KEYS))
        return ProtocolError("malformed", f"header lacks fields {missing} or has unknown {extra}")
    for name, types in _HEADER_FIELDS.items():
        if type(header[name]) not in types:
            return ProtocolError(
                "malformed", f"header field {name!r} has type {type(header[name]).__name__}"
            )
    mtype = header["type"]
    if mtype not in MESSAGE_TYPES:
        return ProtocolError("unknown_type", f"unknown message type {mtype!r}")
    for rule in _ROUTE_RULES.get(mtype, ()):
        if not any(header[name] for name in rule.split("|")):
            return ProtocolError(
                "malformed", f"a {mtype} message needs {rule.replace('|', ' or ')}"
            )
    specs = header["frames"]
    if len(specs) != n_frames:
        return ProtocolError(
            "malformed", f"header lists {len(specs)} frames but {n_frames} arrived"
        )
    return None


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
