"""The vLLM engine helpers that need no engine: the guard that lets an engine start in a process
where numba (through ``bm25s``, which :mod:`games.search` uses) is loaded."""

from __future__ import annotations

from pathlib import Path

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


def test_a_head_size_the_cpu_attention_lacks_is_refused_before_the_engine_starts(
    tmp_path: Path,
) -> None:
    """A model with heads of 16 (the tiny model's shape before v2) started a vLLM-CPU engine,
    and every generation failed (``Unsupported CPU attention configuration: head_dim=16``): a
    run with ``inference.backend=vllm`` then stopped after 3 steps of failed episodes."""
    from arena.models import model_dir, tiny_config
    from arena.policies.vllm_fit import cpu_head_sizes, unsupported_head_size

    narrow = tiny_config()
    narrow.num_attention_heads, narrow.num_key_value_heads, narrow.head_dim = 4, 2, 16
    narrow.save_pretrained(tmp_path)
    tiny, smol = str(model_dir("tiny")), str(model_dir("smollm2-135m"))  # heads of 32 and 64
    message = unsupported_head_size(str(tmp_path), [32, 64, 128])
    assert message == (
        f"inference.backend=vllm cannot serve {tmp_path} on CPU: its attention head size is 16, "
        "and vLLM's CPU attention takes only 32, 64, 128; serve it with the hf backend"
    )
    assert unsupported_head_size(tiny, [32, 64, 128]) is None
    assert unsupported_head_size(smol, [32, 64, 128]) is None
    assert unsupported_head_size(str(tmp_path), []) is None  # an engine that takes any (a GPU's)
    pytest.importorskip("vllm")
    sizes = cpu_head_sizes()  # this machine runs vLLM on CPU
    assert {32, 64} <= set(sizes) and 16 not in sizes
