"""The loaded model and tokenizer of a model spec (:func:`load_model`). A spec's directory and
its tokenizer alone, which need no torch, are :mod:`arena.models.locate`'s."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from arena.models.devices import resolve_device
from arena.models.embedded import smollm2_tokenizer_dir
from arena.models.locate import model_dir, tokenizer_from_dir
from arena.models.precision import to_dtype
from arena.models.specs import EMBEDDED_ALIASES, HUB_ID, TINY_NAME, ModelNotFoundError, not_found
from arena.models.tiny import tiny_model


def load_model(
    spec: str,
    dtype: str | torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    cache: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` for a spec (see :mod:`arena.models`), in eval mode, on
    ``device`` (``auto``: see :func:`~arena.models.devices.resolve_device`)."""
    device = resolve_device(device)
    torch_dtype = to_dtype(dtype, device)
    if spec == TINY_NAME:
        tokenizer = tokenizer_from_dir(smollm2_tokenizer_dir(cache))  # read once a process
        model, tokenizer = tiny_model(0, torch_dtype, cache, tokenizer)
        return model.to(device), tokenizer
    path = Path(spec).expanduser()
    if spec in EMBEDDED_ALIASES or path.exists():
        source: str | Path = model_dir(spec, cache)
    elif HUB_ID.match(spec):
        source = spec
    else:
        raise ModelNotFoundError(not_found(spec))
    try:
        with quiet_loading():
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
            tokenizer = (
                tokenizer_from_dir(source)
                if isinstance(source, Path)
                else AutoTokenizer.from_pretrained(source)
            )
    except OSError as err:
        raise ModelNotFoundError(f"{not_found(spec)}; loading it said: {err}") from err
    return model.to(device).eval(), tokenizer


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' progress bars off for the block, as they were after it. A run loads a
    checkpoint for every strategy read and in every actor it starts, and a ``Loading weights``
    bar for each would bury the run's own lines in its console."""
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
