"""Random-init Llama models of a named shape, for benchmarks that must run where no weights are.

A lent GPU machine has no model weights (``docs/gpu.md``), so ``bench/learner.py``
and ``bench/rollout.py`` take ``--shape`` and build a Llama of that shape with random weights
(seed 0) and SmolLM2's tokenizer (Arena's cache: ``arena.models.load_tokenizer("tiny")``).
Timings and FLOP rates are real; what the model says is noise.

``--shape`` is a name from :data:`SHAPES` or ``key=value`` pairs, e.g.
``layers=4,hidden=256`` (keys: layers, hidden, heads, kv, inter; ``heads`` defaults to
hidden/64, ``kv`` to heads, ``inter`` to 8/3 hidden rounded up to a multiple of 64).
Parameter counts with SmolLM2's 49,152-token vocabulary and tied embeddings:

==========  ======  ======  =====  ===  =====  ==============================================
name        layers  hidden  heads  kv   inter  parameters
==========  ======  ======  =====  ===  =====  ==============================================
tiny        2       64      4      2    128    3.2 M (``arena.models.tiny_config``'s shape)
135m        30      576     9      3    1536   134.5 M (SmolLM2-135M)
360m        32      960     15     5    2560   361.8 M (SmolLM2-360M)
1b          16      2048    32     8    8192   1.07 B (Llama-3.2-1B's body)
1.7b        24      2048    32     32   8192   1.71 B (SmolLM2-1.7B)
==========  ======  ======  =====  ===  =====  ==============================================
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

from arena.models import load_tokenizer, resolve_device

SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "hidden": 64, "heads": 4, "kv": 2, "inter": 128},
    "135m": {"layers": 30, "hidden": 576, "heads": 9, "kv": 3, "inter": 1536},
    "360m": {"layers": 32, "hidden": 960, "heads": 15, "kv": 5, "inter": 2560},
    "1b": {"layers": 16, "hidden": 2048, "heads": 32, "kv": 8, "inter": 8192},
    "1.7b": {"layers": 24, "hidden": 2048, "heads": 32, "kv": 32, "inter": 8192},
}
"""Named shapes (see the module docstring for their parameter counts)."""
KEYS = ("layers", "hidden", "heads", "kv", "inter")


def parse_shape(spec: str) -> dict[str, int]:
    """``135m`` or ``layers=4,hidden=256[,heads=..,kv=..,inter=..]`` -> all five sizes."""
    if spec in SHAPES:
        return dict(SHAPES[spec])
    sizes: dict[str, int] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in KEYS or not value.strip().isdigit() or int(value) <= 0:
            raise ValueError(
                f"shape {spec!r}: expected one of {sorted(SHAPES)} or key=value pairs "
                f"(positive integers) of {', '.join(KEYS)}, with layers and hidden"
            )
        sizes[key] = int(value)
    if "layers" not in sizes or "hidden" not in sizes:
        raise ValueError(f"shape {spec!r}: layers= and hidden= are required")
    sizes.setdefault("heads", max(1, sizes["hidden"] // 64))
    sizes.setdefault("kv", sizes["heads"])
    sizes.setdefault("inter", 64 * math.ceil(8 * sizes["hidden"] / 3 / 64))
    if sizes["hidden"] % sizes["heads"] or sizes["heads"] % sizes["kv"]:
        raise ValueError(f"shape {spec!r}: hidden must divide by heads, and heads by kv")
    return sizes


def shape_config(spec: str, tokenizer: PreTrainedTokenizerBase) -> LlamaConfig:
    """The Llama config of ``spec`` with ``tokenizer``'s vocabulary and special tokens."""
    s = parse_shape(spec)
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=s["hidden"],
        intermediate_size=s["inter"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv"],
        max_position_embeddings=8192,
        rope_theta=100000.0,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def random_model(
    spec: str, device: str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """A Llama of shape ``spec``, random weights from ``seed``, built on ``device`` (``auto``:
    CUDA where there is one), in eval mode, with SmolLM2's tokenizer."""
    tokenizer = load_tokenizer("tiny")
    config = shape_config(spec, tokenizer)
    torch.manual_seed(seed)
    with torch.device(resolve_device(device)):  # built in place: no 4 GB copy for 1b
        model = LlamaForCausalLM(config)
    return model.to(dtype).eval(), tokenizer


def save_random_model(spec: str, out: Path, seed: int = 0) -> Path:
    """The float32 model of :func:`random_model` saved as an HF directory (for a process that
    loads it by path, like an inference actor); returns ``out``."""
    model, tokenizer = random_model(spec, seed=seed)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (a tied embedding counted once)."""
    return sum(p.numel() for p in model.parameters())
