"""The one dtype table of Arena: every tensor dtype that crosses a process boundary.

Frames on the bus (:mod:`arena.bus.codec`), weight buckets and shared-memory files
(:mod:`arena.weights`), checkpoints and model loading (:mod:`arena.models`) all name dtypes by
the canonical names below, and look up sizes and safetensors codes here. The torch and numpy
objects are resolved by name where those libraries are already imported (``getattr(torch,
name)``), so this module stays stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass

from arena.core.errors import did_you_mean


@dataclass(frozen=True)
class DType:
    """One dtype: its canonical name, its size, and how files name it."""

    name: str
    """Canonical name, as torch and numpy spell it (``bfloat16`` has no numpy dtype)."""
    itemsize: int
    """Bytes per element."""
    is_float: bool
    """Floating point: a float tensor may be cast to another float dtype on receipt."""
    safetensors: str
    """The code safetensors headers use (``F32``, ``BF16``, ...)."""


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float64", 8, True, "F64"),
        DType("float32", 4, True, "F32"),
        DType("float16", 2, True, "F16"),
        DType("bfloat16", 2, True, "BF16"),
        DType("int64", 8, False, "I64"),
        DType("int32", 4, False, "I32"),
        DType("int16", 2, False, "I16"),
        DType("int8", 1, False, "I8"),
        DType("uint64", 8, False, "U64"),
        DType("uint32", 4, False, "U32"),
        DType("uint16", 2, False, "U16"),
        DType("uint8", 1, False, "U8"),
        DType("bool", 1, False, "BOOL"),
    )
}
"""Canonical name to :class:`DType`."""

AUTO = "auto"
"""The dtype a config may name for what the machine computes fastest, resolved where the model is
loaded (:func:`arena.models.precision.fast_dtype`: a measurement, so torch)."""

ALIASES: dict[str, str] = {
    "fp64": "float64",
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
}
"""Short names a config may use."""

BY_SAFETENSORS: dict[str, DType] = {d.safetensors: d for d in DTYPES.values()}
"""Safetensors code to :class:`DType`."""


def dtype(name: str) -> DType:
    """The :class:`DType` called ``name`` (a canonical name or an alias); raises ValueError."""
    canonical = ALIASES.get(name, name)
    try:
        return DTYPES[canonical]
    except (KeyError, TypeError):
        known = [*DTYPES, *ALIASES]
        raise ValueError(
            f"unknown dtype {name!r}{did_you_mean(str(name), known)} (known: {', '.join(DTYPES)})"
        ) from None
