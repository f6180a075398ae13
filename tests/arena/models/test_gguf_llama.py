"""arena/models/gguf_llama.py against transformers' own GGUF loader, on a small llama written by
the ``gguf`` package's writer (quantized as the embedded SmolLM2 is: Q8_0, Q4_1 and F32)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from arena.models.gguf_llama import GGUFError, _unpermute, llama_config, llama_state, read_gguf

HIDDEN, HEADS, KV_HEADS, LAYERS, FFN, VOCAB = 64, 4, 2, 2, 128, 64
Q = gguf.GGMLQuantizationType


def write_llama(path: Path, architecture: str = "llama", extra: str | None = None) -> Path:
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(LAYERS)
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(50000.0)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(VOCAB)])
    writer.add_token_types([1] * VOCAB)
    writer.add_token_merges(["t 1"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)

    def add(name: str, shape: tuple[int, ...], kind: gguf.GGMLQuantizationType) -> None:
        weights = rng.standard_normal(shape).astype(np.float32)
        writer.add_tensor(name, gguf.quants.quantize(weights, kind), raw_dtype=kind)

    add("token_embd.weight", (VOCAB, HIDDEN), Q.Q8_0)
    kv = HIDDEN // HEADS * KV_HEADS
    for i in range(LAYERS):
        add(f"blk.{i}.attn_norm.weight", (HIDDEN,), Q.F32)
        add(f"blk.{i}.attn_q.weight", (HIDDEN, HIDDEN), Q.Q4_1)
        add(f"blk.{i}.attn_k.weight", (kv, HIDDEN), Q.Q4_1)
        add(f"blk.{i}.attn_v.weight", (kv, HIDDEN), Q.Q4_1)
        add(f"blk.{i}.attn_output.weight", (HIDDEN, HIDDEN), Q.Q4_1)
        add(f"blk.{i}.ffn_norm.weight", (HIDDEN,), Q.F32)
        add(f"blk.{i}.ffn_gate.weight", (FFN, HIDDEN), Q.Q4_1)
        add(f"blk.{i}.ffn_up.weight", (FFN, HIDDEN), Q.Q4_1)
        add(f"blk.{i}.ffn_down.weight", (HIDDEN, FFN), Q.Q4_1)
    add("output_norm.weight", (HIDDEN,), Q.F32)
    if extra:
        add(extra, (HIDDEN,), Q.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_weights_and_config_are_transformers_own(tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = write_llama(tmp_path / "small.gguf")
    read = read_gguf(path)
    config = llama_config(read)
    assert config["num_key_value_heads"] == KV_HEADS and config["tie_word_embeddings"]
    assert config["rope_parameters"]["rope_theta"] == 50000.0
    assert (config["bos_token_id"], config["eos_token_id"], config["head_dim"]) == (1, 2, 16)
    state = llama_state(read)
    model = LlamaForCausalLM(LlamaConfig(**config))
    theirs = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    assert sorted(state) == sorted(theirs)
    for name, weights in state.items():
        assert weights.dtype == np.float32 and weights.flags.writeable
        assert torch.equal(torch.from_numpy(weights), theirs[name].float()), name
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)


def test_q_and_k_rows_go_back_to_halves_per_head() -> None:
    """convert_hf_to_gguf.py interleaves each head's two rotary halves: rows r0 r1 | r2 r3 of
    one head are stored r0 r2 r1 r3."""
    stored = np.array([[0], [2], [1], [3], [10], [12], [11], [13]])
    assert _unpermute(stored, heads=2).ravel().tolist() == [0, 1, 2, 3, 10, 11, 12, 13]


def test_what_it_cannot_read_is_named(tmp_path: Path) -> None:
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(GGUFError, match=r"not a GGUF file \(it starts b'PK\\x03\\x04'\)"):
        read_gguf(tmp_path / "not.gguf")
    with pytest.raises(GGUFError, match="holds a 'gpt2' model; only llama is read"):
        llama_config(read_gguf(write_llama(tmp_path / "gpt2.gguf", architecture="gpt2")))
    odd = read_gguf(write_llama(tmp_path / "odd.gguf", extra="rope_freqs.weight"))
    with pytest.raises(GGUFError, match="'rope_freqs.weight' has no place in a LlamaForCausalLM"):
        llama_state(odd)
