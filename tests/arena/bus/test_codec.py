"""The wire codec: exact round trips, zero-copy frames, validation, and decoder fuzzing.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_codec.py``.
"""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.bus.codec import Blob, decode, encode
from arena.bus.errors import ProtocolError
from arena.bus.headers import _HEADER_FIELDS, PROTOCOL_VERSION, header_fault, validate_body


def roundtrip(body, **route):
    _, frames = encode("request", body, src="a", service="s", **route)
    return decode([bytes(f) for f in frames]), frames


def test_arrays_travel_as_frames_not_lists() -> None:
    ids = np.arange(8192, dtype=np.int32)
    logprobs = np.linspace(-5, 0, 8192, dtype=np.float32)
    msg, frames = roundtrip({"ids": ids, "logprobs": logprobs, "nested": [{"m": np.eye(2)}]})
    assert len(frames) == 4  # header + three arrays
    assert len(frames[0]) < 300  # the header holds no token data
    header = msgpack.unpackb(frames[0])
    assert header["frames"] == [["int32", [8192]], ["float32", [8192]], ["float64", [2, 2]]]
    body = msg.body
    np.testing.assert_array_equal(body["ids"], ids)
    np.testing.assert_array_equal(body["logprobs"], logprobs)
    np.testing.assert_array_equal(body["nested"][0]["m"], np.eye(2))
    assert body["ids"].dtype == np.int32


def test_send_is_zero_copy_for_arrays() -> None:
    ids = np.arange(100, dtype=np.int64)
    _, frames = encode("request", {"ids": ids}, src="a", service="s")
    assert isinstance(frames[1], memoryview)
    assert np.shares_memory(np.frombuffer(frames[1], dtype=np.int64), ids)


@pytest.mark.parametrize(
    "array",
    [
        np.arange(6, dtype=">i4"),  # big-endian: sent in native order, same values
        np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not C-contiguous
        np.arange(10)[::2],  # strided
        np.asfortranarray(np.ones((2, 3))),
        np.array(5, np.int16),  # 0-d
        np.zeros((3, 0), np.uint8),
    ],
)
def test_any_layout_or_byte_order_arrives_equal(array) -> None:
    msg, _ = roundtrip({"a": array})
    out = msg.body["a"]
    assert out.shape == array.shape and out.dtype == array.dtype.newbyteorder("=")
    np.testing.assert_array_equal(out, array)


def test_unsupported_dtype_fails_at_the_sender() -> None:
    for array in (np.zeros(2, np.complex64), np.array(["a"], dtype=object)):
        with pytest.raises(TypeError, match="dtype"):
            encode("request", array, src="a", service="s")


def test_received_zmq_frames_decode_without_copy() -> None:
    zmq = pytest.importorskip("zmq")
    _, frames = encode("request", {"ids": np.arange(4, dtype=np.int32)}, src="a", service="s")
    received = [bytes(frames[0]), zmq.Frame(bytes(frames[1]))]
    ids = decode(received).body["ids"]
    assert ids.tolist() == [0, 1, 2, 3]
    assert np.shares_memory(ids, np.frombuffer(received[1].buffer, np.uint8))


def test_header_fields_and_blob() -> None:
    msg, _ = roundtrip({"blob": Blob(b"\x00\x01raw"), "n": np.int64(3), "t": (1, 2)})
    assert msg.body == {"blob": b"\x00\x01raw", "n": 3, "t": [1, 2]}
    assert (msg.type, msg.src, msg.service, msg.dst) == ("request", "a", "s", None)
    assert msg.ts > 0 and len(msg.id) > 8


def test_empty_and_scalar_arrays() -> None:
    msg, _ = roundtrip({"e": np.zeros(0, np.int32), "s": np.float32(2.5), "m": np.ones((2, 0))})
    assert msg.body["e"].shape == (0,) and msg.body["s"] == 2.5 and msg.body["m"].shape == (2, 0)


def test_no_pickle_objects_on_the_wire() -> None:
    with pytest.raises(TypeError, match="no pickle"):
        encode("request", {"x": object()}, src="a", service="s")
    # a failed encode leaves nothing behind for the next one
    msg, _ = roundtrip({"ok": 1})
    assert msg.body == {"ok": 1}


def test_encode_rejects_unknown_type_and_oversize() -> None:
    with pytest.raises(ValueError, match="unknown message type"):
        encode("gossip", 1, src="a", service="s")
    with pytest.raises(ValueError, match="exceeds"):
        encode("request", np.zeros(1000, np.uint8), src="a", service="s", max_bytes=500)


def _header(**changes) -> bytes:
    _, frames = encode("request", 1, src="a", service="s")
    header = msgpack.unpackb(frames[0])
    header.update(changes)
    return msgpack.packb(header)


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        ([], "malformed"),
        ([b"\xc1"], "malformed"),
        ([msgpack.packb("a string")], "malformed"),
        ([_header(v=PROTOCOL_VERSION + 1)], "bad_version"),
        ([_header(type="gossip")], "unknown_type"),
        ([_header(id=5)], "malformed"),
        ([_header(service=None)], "malformed"),  # a request needs dst or service
        ([_header(), b"extra"], "malformed"),  # frame count disagrees with the header
        ([_header(surprise=1)], "malformed"),
        (
            [
                _header(),
            ],
            None,
        ),
    ],
)
def test_decode_validates_header(frames, code) -> None:
    if code is None:
        assert decode(frames).body == 1
        return
    with pytest.raises(ProtocolError) as err:
        decode(frames)
    assert err.value.code == code


def test_decode_size_limit() -> None:
    _, frames = encode("request", np.zeros(2000, np.uint8), src="a", service="s")
    with pytest.raises(ProtocolError) as err:
        decode([bytes(f) for f in frames], max_bytes=1000)
    assert err.value.code == "too_large"


def test_body_frame_mismatch_is_malformed() -> None:
    _, frames = encode("request", np.zeros(4, np.int32), src="a", service="s")
    msg = decode([bytes(frames[0]), b"\0" * 15])  # 15 bytes cannot be 4 int32
    with pytest.raises(ProtocolError, match="needs 16"):
        _ = msg.body


def test_body_schema() -> None:
    validate_body("error", {"code": "x", "message": "y"})
    with pytest.raises(ProtocolError, match="lacks field 'message'"):
        validate_body("error", {"code": "x"})
    with pytest.raises(ProtocolError, match="'pid' has type str"):
        validate_body(
            "register",
            {"name": "a", "kind": "k", "services": [], "topics": [], "host": "h", "pid": "1"},
        )


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=0, max_size=4))
def test_fuzz_random_bytes_never_escape_as_other_exceptions(frames) -> None:
    try:
        msg = decode(frames)
        _ = msg.body
    except ProtocolError:
        pass


def _values(floats: st.SearchStrategy) -> st.SearchStrategy:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | floats
        | st.text()
        | st.binary()
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )


_msgpack_values = _values(st.floats())


@settings(max_examples=300, deadline=None)
@given(_msgpack_values, st.data())
def test_fuzz_mutated_valid_messages(value, data) -> None:
    """Valid messages with random header fields replaced or bytes flipped decode or say why."""
    _, frames = encode("request", {"v": value}, src="a", service="s", msg_id="fixed")
    header = msgpack.unpackb(frames[0])
    key = data.draw(st.sampled_from(sorted(header)))
    header[key] = data.draw(_msgpack_values)
    raw = bytearray(msgpack.packb(header))
    if raw and data.draw(st.booleans()):
        raw[data.draw(st.integers(0, 10**6)) % len(raw)] ^= data.draw(st.integers(1, 255))
    try:
        _ = decode([bytes(raw)]).body
    except ProtocolError:
        pass


_field_values = st.sampled_from(
    [
        None,
        "",
        "x",
        "request",
        "reply",
        "episode",
        "weights",
        "control",
        "heartbeat",
        "gossip",
        1,
        2,
        True,
        1.5,
        b"",
        b"\x90",
        [],
        [["int32", [1]]],
        {},
    ]
)


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(
        ["request", "reply", "error", "episode", "weights", "control", "heartbeat", "register"]
    ),
    st.dictionaries(st.sampled_from(sorted(_HEADER_FIELDS) + ["extra"]), _field_values, max_size=4),
    st.lists(st.sampled_from(sorted(_HEADER_FIELDS)), max_size=2),
    st.integers(0, 2),
)
def test_fast_header_check_agrees_with_reference_rules(mtype, changes, removed, n_frames) -> None:
    """decode's one-expression check accepts exactly the headers the reference rules accept."""
    _, frames = encode(mtype, None, src="a", dst="b", reply_to="r", msg_id="i")
    header = msgpack.unpackb(frames[0])
    header.update(changes)
    for name in removed:
        header.pop(name, None)
    message = [msgpack.packb(header), *([b"\0\0\0\0"] * n_frames)]
    fault = header_fault(header, n_frames)
    if fault is None:
        assert decode(message).type == header["type"]
    else:
        with pytest.raises(ProtocolError) as err:
            decode(message)
        assert err.value.code == fault.code


@settings(max_examples=100, deadline=None)
@given(_values(st.floats(allow_nan=False)))
def test_fuzz_roundtrip_exact(value) -> None:
    msg, _ = roundtrip(value)
    assert msg.body == value
