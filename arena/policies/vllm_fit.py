"""What a vLLM engine can serve of a model, read from the model's config before the engine
starts: its context (at most the model's positions) and, on CPU, its attention head size (vLLM's
CPU attention takes a fixed set; another starts and then fails every generation). Once started,
an engine that compiles nothing runs its sampler uncompiled too (:func:`eager_sampler`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import AutoConfig

DEFAULT_CONTEXT = 4096
"""Tokens of context the engine is started with by default: a game's prompt and reply fit, and
the KV cache stays small; a model with fewer positions gets its own (the tests' tiny, 2048)."""


def context_length(path: str, requested: int | None) -> int | None:
    """``requested`` tokens of context, at most the model's ``max_position_embeddings`` (None:
    vLLM takes the model's own)."""
    positions = getattr(AutoConfig.from_pretrained(path), "max_position_embeddings", None)
    if requested is None or positions is None:
        return requested
    return min(requested, int(positions))


def unsupported_head_size(path: str, supported: Sequence[int]) -> str | None:
    """Why an engine whose attention takes only the head sizes ``supported`` (empty: any)
    cannot serve the model at ``path``, or None. vLLM's CPU attention starts with any model
    and fails every generation after (``Unsupported CPU attention configuration: head_dim=16``,
    what the tests' tiny model had before it took heads of 32): said before the engine starts
    instead."""
    config = AutoConfig.from_pretrained(path)
    size = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if not supported or int(size) in supported:
        return None
    return (
        f"inference.backend=vllm cannot serve {path} on CPU: its attention head size is "
        f"{size}, and vLLM's CPU attention takes only {', '.join(map(str, supported))}; "
        f"serve it with the hf backend"
    )


def cpu_head_sizes() -> list[int]:
    """The head sizes vLLM's CPU attention takes, where vLLM runs on CPU (else empty: any)."""
    try:
        from vllm.platforms import current_platform
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    except ImportError:  # another vLLM layout: its own error, at the first generation
        return []
    return list(CPUAttentionBackend.get_supported_head_sizes()) if current_platform.is_cpu() else []


def eager_sampler(llm: Any) -> bool:
    """Where ``llm``'s engine compiles no model graph (``enforce_eager``; any engine with LoRA
    on CPU), run the sampler's one ``torch.compile``'d helper eagerly as well; returns whether.

    The helper (``batched_count_greater_than``: each sampled token's rank, for its logprob) is
    compiled by inductor on the first generation, whatever the engine's settings: 9.4 s more
    before the first reply of every such engine, 4.6 CPU s in the process and more in
    inductor's workers (measured, with inductor's cache warm), for one comparison of a (batch,
    vocabulary) tensor. Uncompiled it makes that comparison's boolean tensor, 49 MB at a batch of
    1000 and SmolLM2's 49152 tokens: nothing beside an engine running uncompiled anyway.
    """
    from vllm.config import CompilationMode
    from vllm.v1.sample import sampler

    if llm.llm_engine.vllm_config.compilation_config.mode != CompilationMode.NONE:
        return False
    helper = sampler.batched_count_greater_than
    sampler.batched_count_greater_than = getattr(helper, "_torchdynamo_orig_callable", helper)
    return True
