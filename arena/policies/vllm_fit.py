"""What a vLLM engine can serve of a model, read from the model's config before the engine
starts: its context (at most the model's positions) and, on CPU, its attention head size (vLLM's
CPU attention takes a fixed set; another starts and then fails every generation)."""

from __future__ import annotations

from collections.abc import Sequence

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
