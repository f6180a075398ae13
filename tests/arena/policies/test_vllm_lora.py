"""The vLLM engine helpers that need no engine: the guard that lets an engine start in a process
where numba (through ``bm25s``, which :mod:`games.search` uses) is loaded."""

from __future__ import annotations

import pytest

from arena.policies.vllm_lora import import_vllm


def test_the_kernel_scan_passes_over_llvmlites_lazy_library() -> None:
    pytest.importorskip("vllm")
    ffi = pytest.importorskip("llvmlite.binding.ffi")
    from vllm.triton_utils.dispatcher import _rebind_kernels

    import games.search.retrieval  # noqa: F401  (loads bm25s, hence numba, as a run would)

    ffi.lib._fntab.pop("__dict__", None)
    with pytest.raises(AttributeError, match="_lib_fn_wrapper"):
        _rebind_kernels([])  # what failed every in-process engine start in CI

    import_vllm()
    _rebind_kernels([])
    assert vars(ffi.lib) == {}
