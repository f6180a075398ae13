"""Which float dtype a model is loaded in: names from the project's dtype table, and ``auto``,
measured once per process (bfloat16 only where this machine computes it fast)."""

from __future__ import annotations

import functools
import logging
import time

import torch

from arena.core import dtypes
from arena.core.errors import did_you_mean
from arena.models.devices import resolve_device

_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, dtypes.dtype(name).name)
    for name in (*dtypes.DTYPES, *dtypes.ALIASES)
    if dtypes.dtype(name).is_float
}
"""The dtypes a model may be loaded in: the float dtypes of the project's table, aliases included."""

AUTO = dtypes.AUTO
"""The dtype that names what this machine computes fastest (see :func:`fast_dtype`)."""
BF16_MIN_SPEEDUP = 1.3
"""bfloat16 is chosen on a CPU only when its matmuls are at least this much faster than
float32's: with native bf16 (AVX512-BF16, AMX) they are 2-3x faster; without it, emulated,
they are 50-100x slower (1 GFLOP/s against 143 on an AVX2 EPYC)."""

log = logging.getLogger("arena.models")


def choose_dtype(device_type: str, fp32_gflops: float, bf16_gflops: float) -> str:
    """``bfloat16`` where it is measurably faster than ``float32``, else ``float32``.
    On CUDA the caller passes bf16 support as the measurement (any positive speed)."""
    if device_type == "cuda":
        return "bfloat16" if bf16_gflops > 0 else "float32"
    return "bfloat16" if bf16_gflops >= BF16_MIN_SPEEDUP * fp32_gflops else "float32"


def matmul_gflops(dtype: torch.dtype, n: int = 384, budget_s: float = 0.2) -> float:
    """Single-thread matmul speed of ``dtype`` on this CPU, measured for at most ~``budget_s``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        a @ b  # warm up the kernel choice
        reps, start = 0, time.perf_counter()
        while True:
            a @ b
            reps += 1
            elapsed = time.perf_counter() - start
            if elapsed > budget_s or reps >= 20:
                return 2 * n**3 * reps / elapsed / 1e9
    finally:
        torch.set_num_threads(threads)


@functools.cache
def fast_dtype(device: str = "cpu") -> str:
    """The dtype ``auto`` means on ``device``: measured on a CPU (bf16 is fast only with native
    support), bf16 support on CUDA. Logged once per process, with the measurement."""
    device_type = resolve_device(device).type
    if device_type == "cuda":
        choice = choose_dtype("cuda", 1.0, 1.0 if torch.cuda.is_bf16_supported() else 0.0)
        log.info("dtype auto on %s: %s", device, choice)
        return choice
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    choice = choose_dtype("cpu", fp32, bf16)
    log.warning(
        "dtype auto: %s (this CPU's matmuls: float32 %.0f GFLOP/s, bfloat16 %.0f GFLOP/s, one "
        "thread); set dtype explicitly to override",
        choice,
        fp32,
        bf16,
    )
    return choice


def to_dtype(dtype: str | torch.dtype, device: str | torch.device = "cpu") -> torch.dtype:
    """A torch dtype from its name; ``auto`` is :func:`fast_dtype` of ``device``."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == AUTO:
        dtype = fast_dtype(str(device))
    try:
        return _DTYPES[dtype]
    except KeyError:
        hint = did_you_mean(str(dtype), _DTYPES)
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPES)}{hint}"
        ) from None
