"""A model spec to its directory (:func:`model_dir`) and its tokenizer (:func:`load_tokenizer`),
without torch where the cache already holds them.

Rollout actors, the trainer and tournament hosts need a policy's tokenizer (its chat template)
and no model; importing torch and ``transformers.models.auto`` for it cost each of them about
3 s of CPU at every start. A directory whose ``tokenizer_config.json`` names no tokenizer class,
or the generic fast one, is loaded with :class:`~transformers.TokenizersBackend` itself, which
is what ``AutoTokenizer`` resolves it to; any other class goes through ``AutoTokenizer``.

Transformers before 5.19 imports ``modeling_gguf_pytorch_utils`` (and with it torch) at the top
of the module that defines that class, for GGUF tokenizers only; :func:`_without_gguf_torch`
defers it to the first GGUF tokenizer load, so the class itself costs no torch in either version.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.models.embedded import smollm2_dir, smollm2_tokenizer_dir
from arena.models.specs import EMBEDDED_ALIASES, TINY_NAME, ModelNotFoundError, not_found

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

GENERIC_CLASSES = {None, "TokenizersBackend", "PreTrainedTokenizerFast"}
"""``tokenizer_class`` values that ``AutoTokenizer`` loads as the generic fast tokenizer."""

GGUF_UTILS = "transformers.modeling_gguf_pytorch_utils"
"""Imports torch when it is installed; transformers 5.17's tokenizer module imports it eagerly."""


def model_dir(spec: str, cache: str | os.PathLike[str] | None = None) -> Path:
    """A local HF directory for ``spec`` (converting or saving it first if needed).

    A hub id that is not a local path is returned as given by
    :func:`~arena.models.loading.load_model`'s loaders; here it raises, since only the hub can
    resolve it.
    """
    if spec in EMBEDDED_ALIASES:
        return smollm2_dir(cache)
    if spec == TINY_NAME:
        from arena.models.tiny import tiny_dir  # builds a model: torch

        return tiny_dir(0, cache)
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path
    if path.exists():
        raise ModelNotFoundError(f"{spec!r} is not a Hugging Face model directory (no config.json)")
    raise ModelNotFoundError(not_found(spec))


def load_tokenizer(
    spec: str, cache: str | os.PathLike[str] | None = None
) -> PreTrainedTokenizerBase:
    """The tokenizer of a model spec (``tiny`` shares SmolLM2's)."""
    if spec == TINY_NAME:
        return tokenizer_from_dir(smollm2_tokenizer_dir(cache))
    return tokenizer_from_dir(model_dir(spec, cache))


_LOADED: dict[tuple[str, tuple[tuple[str, int, int], ...]], PreTrainedTokenizerBase] = {}
"""Each tokenizer directory this process has loaded, by its path and its files' versions."""


_SPARE: dict[tuple[str, tuple[tuple[str, int, int], ...]], PreTrainedTokenizerBase] = {}
"""A copy made ahead (:func:`keep_spare_tokenizer`), handed to the next call for its directory."""


def tokenizer_from_dir(path: str | os.PathLike[str]) -> PreTrainedTokenizerBase:
    """The tokenizer saved in the HF directory ``path``, as ``AutoTokenizer`` loads it. A
    directory is loaded once per process (and version of its files); each call gets its own
    copy of it, which costs a tenth of a load (0.3 s for SmolLM2's). A process forked by
    ``arena preload`` finds the load made, and its first call a copy made before the fork
    (:func:`arena.models.tokenizing.preload`)."""
    path = Path(path).resolve()
    key = _key(path)
    if key not in _LOADED:
        _LOADED[key] = _load_tokenizer(path)
    spare = _SPARE.pop(key, None)
    return spare if spare is not None else copy.deepcopy(_LOADED[key])


def keep_spare_tokenizer(path: str | os.PathLike[str]) -> None:
    """Copy ``path``'s tokenizer now, for the next :func:`tokenizer_from_dir` of it to take as
    it is: a server that forks makes the copy once, and each child's first call takes its own
    (the fork's memory is the child's own) without copying."""
    key = _key(Path(path).resolve())
    if key not in _SPARE:
        _SPARE[key] = tokenizer_from_dir(path)


def _key(path: Path) -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """``path`` and the version of each of its files: a directory written again loads again."""
    return str(path), tuple(sorted((f.name, *_version(f)) for f in path.iterdir() if f.is_file()))


def _version(file: Path) -> tuple[int, int]:
    status = file.stat()
    return status.st_mtime_ns, status.st_size


def _load_tokenizer(path: Path) -> PreTrainedTokenizerBase:
    config = path / "tokenizer_config.json"
    named = json.loads(config.read_text()).get("tokenizer_class") if config.is_file() else None
    if (path / "tokenizer.json").is_file() and named in GENERIC_CLASSES:
        with _without_gguf_torch():
            from transformers import TokenizersBackend

        return TokenizersBackend.from_pretrained(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _load_gguf_checkpoint(*args: Any, **kwargs: Any) -> Any:
    """``load_gguf_checkpoint`` imported when a GGUF tokenizer is first loaded, not before."""
    return importlib.import_module(GGUF_UTILS).load_gguf_checkpoint(*args, **kwargs)


@contextmanager
def _without_gguf_torch() -> Iterator[None]:
    """Stand a torch-free stub in for :data:`GGUF_UTILS` while the tokenizer module is imported.

    Transformers 5.17 binds ``load_gguf_checkpoint`` from it at import (5.19 imports it in the
    GGUF branch); the stub's function imports the real module on first call. The stub leaves
    ``sys.modules`` afterwards, so any later import gets the real module; where torch is
    already imported there is nothing to save and nothing is stood in.
    """
    if "torch" in sys.modules or GGUF_UTILS in sys.modules:
        yield
        return
    stub = types.ModuleType(GGUF_UTILS, _load_gguf_checkpoint.__doc__)
    stub.load_gguf_checkpoint = _load_gguf_checkpoint  # type: ignore[attr-defined]
    sys.modules[GGUF_UTILS] = stub
    try:
        yield
    finally:
        if sys.modules.get(GGUF_UTILS) is stub:
            del sys.modules[GGUF_UTILS]
