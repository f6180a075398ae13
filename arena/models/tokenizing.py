"""A model's tokenizer for chat prompts, without transformers: :func:`chat_tokenizer`.

Rollout actors, a run's own process, evaluations and ``arena play`` turn messages into token ids
and sampled ids back into text (:class:`~arena.policies.chat.ChatFormat`); they run no model.
Importing transformers for that cost each of them about 2.5 s of CPU at every start, more than
the rest of a rollout actor's start. :class:`ChatTokenizer` does the same work with what
transformers itself delegates to: the ``tokenizers`` library reads ``tokenizer.json``, and the
chat template is rendered by jinja2 in the environment transformers builds for it
(``apply_chat_template``: a sandbox, ``trim_blocks``, ``lstrip_blocks``, loop controls, its
``tojson``, ``raise_exception`` and ``strftime_now``, and the special tokens as variables).

Only a directory that transformers would load as its generic fast tokenizer qualifies (a
``tokenizer.json``, no tokenizer class of its own, no clean-up of decoded spaces); any other
gets transformers' own tokenizer, which has the same methods.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from arena.models.cache import cache_dir
from arena.models.embedded import smollm2_tokenizer_dir
from arena.models.locate import (
    GENERIC_CLASSES,
    keep_spare_tokenizer,
    model_dir,
    tokenizer_from_dir,
)
from arena.models.specs import EMBEDDED_NAME, TINY_NAME

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token")
SPECIAL_TOKENS += ("mask_token",)
"""The special-token names transformers passes to a chat template as variables, where set."""


class ChatTokenizer:
    """The part of a Hugging Face tokenizer that chat prompts use, with the same results:
    ``apply_chat_template`` (as text), ``__call__``/``encode``, ``decode``,
    ``convert_ids_to_tokens``, ``len()`` and ``chat_template``."""

    def __init__(
        self, path: str | os.PathLike[str], chat_template: str | None, special: Mapping[str, str]
    ) -> None:
        self.name_or_path = str(path)
        self.backend_tokenizer = _read(Path(path) / "tokenizer.json")
        self.chat_template = chat_template
        self.special_tokens_map = dict(special)

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text, add_special_tokens=add_special_tokens)}

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, token_ids: Iterable[int] | int, skip_special_tokens: bool = False) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        return self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str | None]:
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def apply_chat_template(
        self,
        conversation: Sequence[Mapping[str, Any]],
        chat_template: str | None = None,
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> str | dict[str, list[int]]:
        template = chat_template or self.chat_template
        if template is None:
            raise ValueError(f"{self.name_or_path} has no chat template and none was given")
        text = _compiled(template).render(
            messages=[dict(m) for m in conversation],
            tools=None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            **{**self.special_tokens_map, **kwargs},
        )
        if not tokenize:
            return text
        ids = self.encode(text, add_special_tokens=False)  # transformers 5 returns a dict here
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}


_READ: dict[tuple[str, int, int], Any] = {}
"""Each ``tokenizer.json`` this process has read, by its path and version (mtime, size)."""


def _read(file: Path) -> Any:
    """``file`` as a ``tokenizers.Tokenizer``, read once per process and version of the file:
    encoding and decoding leave it as it was, so the ChatTokenizers of one file share it (and
    a process forked by ``arena preload`` shares the one its server read: :func:`preload`)."""
    from tokenizers import Tokenizer

    status = file.stat()
    key = (str(file.resolve()), status.st_mtime_ns, status.st_size)
    if key not in _READ:
        tokenizer = Tokenizer.from_file(str(file))
        # as transformers loads it: a chat prompt is never cut or padded by the tokenizer
        tokenizer.no_truncation()
        tokenizer.no_padding()
        _READ[key] = tokenizer
    return _READ[key]


def preload() -> None:
    """Read SmolLM2's tokenizer (``tiny``'s and the embedded default's) in both forms a run's
    processes load it, where the cache holds it already: for the processes that ``arena
    preload`` forks, which then find it read (about 0.5 CPU-s each) and their first copy of it
    made (0.3 s more). Extracts nothing."""
    directory = cache_dir() / "tokenizers" / EMBEDDED_NAME
    if (directory / "tokenizer.json").is_file():
        chat_tokenizer_from_dir(directory)
        keep_spare_tokenizer(directory)


_TEMPLATES: dict[str, Any] = {}


def _compiled(template: str) -> Any:
    """``template`` compiled once, in the jinja2 environment transformers renders chat in."""
    if template not in _TEMPLATES:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, **options: Any) -> str:
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, **options)

        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        _TEMPLATES[template] = env.from_string(template)
    return _TEMPLATES[template]


def chat_tokenizer(spec: str, cache: str | os.PathLike[str] | None = None) -> Any:
    """The tokenizer of a model spec for chat prompts: a :class:`ChatTokenizer` where the
    directory qualifies (see the module's docstring), else transformers' (``load_tokenizer``)."""
    path = smollm2_tokenizer_dir(cache) if spec == TINY_NAME else model_dir(spec, cache)
    return chat_tokenizer_from_dir(path)


def chat_tokenizer_from_dir(path: str | os.PathLike[str]) -> Any:
    path = Path(path)
    config_file = path / "tokenizer_config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    qualifies = (
        (path / "tokenizer.json").is_file()
        and config.get("tokenizer_class") in GENERIC_CLASSES
        and not config.get("clean_up_tokenization_spaces", False)
    )
    if not qualifies:
        return tokenizer_from_dir(path)
    template = config.get("chat_template")
    if template is None and (path / "chat_template.jinja").is_file():
        template = (path / "chat_template.jinja").read_text()
    if template is not None and not isinstance(template, str):  # named templates: transformers'
        return tokenizer_from_dir(path)
    special = {}
    for name in SPECIAL_TOKENS:
        token = config.get(name)
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str):
            special[name] = token
    return ChatTokenizer(path, template, special)
