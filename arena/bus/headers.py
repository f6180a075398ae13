"""What a valid bus message is: the header's fields, the routes each message type needs, the
body schemas, and the checks that hold an inbound message to them.

:func:`decode_header` is the broker's hot path: one expression accepts a correct header, and only
a faulty one goes through :func:`header_fault`, the reference statement of the rules, which names
the fault. The layout of a message and how bodies are packed is :mod:`arena.bus.codec`'s.
"""

from __future__ import annotations

from typing import Any

import msgpack

from arena.bus.errors import ProtocolError

PROTOCOL_VERSION = 1
MESSAGE_TYPES = frozenset(
    {"register", "heartbeat", "request", "reply", "error", "episode", "weights", "control"}
)
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Soft limit on a whole message (header and frames); over it, an ``error`` reply."""

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
