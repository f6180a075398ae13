"""A llama GGUF read as a transformers ``LlamaForCausalLM``: its config and float32 weights.

One pass over the file: transformers' own GGUF loader parses it three times (config, tokenizer,
weights), reading every entry of the 49152-token vocabulary as its own numpy view, and builds a
name map per tensor: 45 of the 54 s the embedded SmolLM2's conversion took. Here the metadata is
read with ``struct``, the tensors are de-quantized by the ``gguf`` package, and the names and the
q/k row order are mapped back as ``convert_hf_to_gguf.py`` changed them (the same inverse as
transformers': the converted weights are equal, bit for bit).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

MAGIC = b"GGUF"
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i",
    6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}  # fmt: skip
"""GGUF's value types with a fixed size (8 is a string, 9 an array)."""
_STRING, _ARRAY = 8, 9
_LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


class GGUFError(ValueError):
    """A file that is not a GGUF this reader takes (it names what it found)."""


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    """In numpy's order (GGUF lists the innermost dimension first)."""
    kind: GGMLQuantizationType
    offset: int
    """From the start of the file."""


@dataclass(frozen=True)
class GGUF:
    metadata: dict[str, Any]
    tensors: dict[str, Tensor]
    data: bytes

    def array(self, name: str) -> np.ndarray:
        """Tensor ``name`` de-quantized to float32, in numpy's order."""
        tensor = self.tensors[name]
        block, size = GGML_QUANT_SIZES[tensor.kind]
        count = int(np.prod(tensor.shape))
        raw = np.frombuffer(self.data, np.uint8, count // block * size, tensor.offset)
        rows = raw.reshape(*tensor.shape[:-1], tensor.shape[-1] // block * size)
        weights = dequantize(rows, tensor.kind)  # a view of the file's bytes for F32
        if weights.dtype == np.float32 and weights.flags.writeable:
            return weights
        return np.array(weights, dtype=np.float32)


def read_gguf(path: str | Path) -> GGUF:
    """The metadata and tensor table of the GGUF (version 2 or 3) at ``path``."""
    data = Path(path).read_bytes()
    reader = _Reader(data)
    if data[:4] != MAGIC:
        raise GGUFError(f"{path} is not a GGUF file (it starts {data[:4]!r})")
    reader.at = 4
    version = reader.scalar(4)
    if version not in (2, 3):
        raise GGUFError(f"{path} is GGUF version {version}; versions 2 and 3 are read")
    tensor_count, value_count = reader.scalar(10), reader.scalar(10)
    metadata = {}
    for _ in range(value_count):
        key = reader.string()
        metadata[key] = reader.value(reader.scalar(4))
    table = []
    for _ in range(tensor_count):
        name = reader.string()
        dims = [reader.scalar(10) for _ in range(reader.scalar(4))]
        kind = GGMLQuantizationType(reader.scalar(4))
        table.append((name, tuple(reversed(dims)), kind, reader.scalar(10)))
    alignment = int(metadata.get("general.alignment", 32))
    start = -(-reader.at // alignment) * alignment
    tensors = {name: Tensor(shape, kind, start + at) for name, shape, kind, at in table}
    return GGUF(metadata, tensors, data)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def scalar(self, kind: int) -> Any:
        fmt = _SCALARS[kind]
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.scalar(10)
        self.at += length
        return self.data[self.at - length : self.at].decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.scalar(4), self.scalar(10)
            return [self.value(item) for _ in range(count)]
        if kind not in _SCALARS:
            raise GGUFError(f"unknown GGUF value type {kind} at byte {self.at}")
        return self.scalar(kind)


def llama_config(gguf: GGUF) -> dict[str, Any]:
    """The ``LlamaConfig`` fields of a llama GGUF's metadata."""
    meta = gguf.metadata
    architecture = meta.get("general.architecture")
    if architecture != "llama":
        raise GGUFError(f"the GGUF holds a {architecture!r} model; only llama is read")
    heads = meta["llama.attention.head_count"]
    hidden = meta["llama.embedding_length"]
    tokens = meta.get("tokenizer.ggml.tokens")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": meta.get("llama.vocab_size") or len(tokens or ()),
        "hidden_size": hidden,
        "intermediate_size": meta["llama.feed_forward_length"],
        "num_hidden_layers": meta["llama.block_count"],
        "num_attention_heads": heads,
        "num_key_value_heads": meta.get("llama.attention.head_count_kv", heads),
        "head_dim": meta.get("llama.rope.dimension_count", hidden // heads),
        "max_position_embeddings": meta["llama.context_length"],
        "rms_norm_eps": meta["llama.attention.layer_norm_rms_epsilon"],
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": meta.get("llama.rope.freq_base", 10000.0),
        },
        "tie_word_embeddings": "output.weight" not in gguf.tensors,
    }
    for field, key in (("bos", "bos"), ("eos", "eos"), ("pad", "padding"), ("unk", "unknown")):
        if f"tokenizer.ggml.{key}_token_id" in meta:
            config[f"{field}_token_id"] = meta[f"tokenizer.ggml.{key}_token_id"]
    return config


def llama_state(gguf: GGUF) -> dict[str, np.ndarray]:
    """The GGUF's tensors under transformers' names, float32, q and k rows in its order."""
    config = llama_config(gguf)
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    state = {}
    for name in gguf.tensors:
        stem, _, suffix = name.rpartition(".")
        parts = stem.split(".")
        if parts[0] == "blk" and len(parts) == 3 and parts[2] in _LAYER:
            target = f"model.layers.{parts[1]}.{_LAYER[parts[2]]}.{suffix}"
        elif stem in _TOP:
            target = f"{_TOP[stem]}.{suffix}"
        else:
            raise GGUFError(f"the GGUF's tensor {name!r} has no place in a LlamaForCausalLM")
        weights = gguf.array(name)
        if parts[-1] in ("attn_q", "attn_k"):
            weights = _unpermute(weights, heads if parts[-1] == "attn_q" else kv_heads)
        state[target] = weights
    return state


def _unpermute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo convert_hf_to_gguf.py's row order for rotary q/k (halves -> interleaved pairs)."""
    half = weights.shape[0] // heads // 2
    return weights.reshape(heads, half, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)
