"""The tiny test model: a 2-layer, 64-wide Llama (two attention heads of 32, so vLLM's CPU
attention serves it too) with SmolLM2's tokenizer, built in code from a seed (no network, no
download), and saved as a cached directory for engines that load from disk."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase, TokenizersBackend

from arena.models.cache import build_atomically, cache_dir
from arena.models.embedded import smollm2_tokenizer_dir
from arena.models.precision import to_dtype
from arena.models.specs import SHAPES, TINY_NAME

TINY_VERSION = "v2"
"""The version of ``tiny``'s shape, in its cached directory's name. v2: two heads of 32 (one
key-value head), which vLLM's CPU attention serves; v1 had four of 16, the same weights'
shapes."""


def tiny_config(vocab_size: int = 49152) -> LlamaConfig:
    """A 2-layer, 64-wide Llama: about 3.3 M parameters, mostly the tied embedding."""
    return LlamaConfig(
        **{**SHAPES[TINY_NAME], "vocab_size": vocab_size},
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
    )


def tiny_model(
    seed: int = 0,
    dtype: str | torch.dtype = torch.float32,
    cache: str | os.PathLike[str] | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """A tiny randomly initialised Llama with SmolLM2's tokenizer; same seed, same weights."""
    # the class AutoTokenizer picks for SmolLM2's, without importing its registry of every model
    tokenizer = tokenizer or TokenizersBackend.from_pretrained(smollm2_tokenizer_dir(cache))
    config = tiny_config(len(tokenizer))
    config.bos_token_id, config.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG stream alone
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    # Random logits are nearly flat; a larger output scale makes sampling less uniform, so
    # tests can tell greedy from sampled and one weight version from another.
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(8.0)
    return model.to(to_dtype(dtype)).eval(), tokenizer


def tiny_dir(seed: int = 0, cache: str | os.PathLike[str] | None = None) -> Path:
    """The tiny model saved as an HF directory (for engines that load from disk, like vLLM).
    Its name carries the shape's version (:data:`TINY_VERSION`): a cache saved from an earlier
    shape is never read as this one."""

    def build(tmp: Path) -> None:
        model, tokenizer = tiny_model(seed, cache=cache)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)

    return build_atomically(
        cache_dir(cache) / "models" / f"tiny-{TINY_VERSION}-{seed}", build, "saving the tiny model"
    )
