"""A spec's directory and tokenizer without torch (:mod:`arena.models.locate`): what rollout
actors, the trainer and tournament hosts load at every start."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from arena.models import load_tokenizer, locate, smollm2_tokenizer_dir
from arena.models.locate import tokenizer_from_dir
from tests.cli import python_probe

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]


def test_the_trainer_and_a_rollout_actor_start_without_torch() -> None:
    """Neither holds a model: they import no torch (3 s of CPU at each start of each process).

    Under transformers 5.17 the tokenizer's module imports torch through GGUF_UTILS; the stub
    that stands in for it is gone once the tokenizer is loaded.
    """
    load_tokenizer("tiny")  # cached before the child looks
    probe = (
        "import sys, arena.actors.rollout, arena.run.coordinator\n"
        "from arena.models import load_tokenizer\n"
        "from arena.models.locate import GGUF_UTILS\n"
        "load_tokenizer('tiny')\n"
        "print(sorted(m for m in ('torch', 'transformers.models.auto', GGUF_UTILS) if m in sys.modules))\n"
    )
    assert python_probe(probe) == "[]"


def test_the_tokenizer_is_what_auto_tokenizer_loads(tmp_path: Path) -> None:
    source = smollm2_tokenizer_dir()
    ours, auto = load_tokenizer("tiny"), AutoTokenizer.from_pretrained(source)
    assert type(ours) is type(auto)
    text = auto.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert ours.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True) == text
    assert ours(text)["input_ids"] == auto(text)["input_ids"]
    assert (ours.eos_token_id, ours.pad_token_id) == (auto.eos_token_id, auto.pad_token_id)
    # a directory that names a tokenizer class of its own is AutoTokenizer's to build
    named = tmp_path / "named"
    shutil.copytree(source, named)
    config = json.loads((named / "tokenizer_config.json").read_text())
    (named / "tokenizer_config.json").write_text(
        json.dumps({**config, "tokenizer_class": "GPT2Tokenizer"})
    )
    assert type(tokenizer_from_dir(named)) is type(AutoTokenizer.from_pretrained(named))


def test_a_directory_is_loaded_once_per_version_and_each_caller_gets_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process forked by ``arena preload`` copies what its server loaded instead of loading
    it again; a copy changed by one caller leaves the others' alone; a rewritten file is read."""
    directory = tmp_path / "tokenizer"
    shutil.copytree(smollm2_tokenizer_dir(), directory)
    loads: list[Path] = []
    load = locate._load_tokenizer
    monkeypatch.setattr(locate, "_load_tokenizer", lambda path: loads.append(path) or load(path))
    first, second = tokenizer_from_dir(directory), tokenizer_from_dir(directory)
    assert len(loads) == 1 and first is not second
    assert first.encode("bet or check?") == second.encode("bet or check?")
    first.padding_side = "left" if second.padding_side == "right" else "right"
    assert tokenizer_from_dir(directory).padding_side == second.padding_side
    config = directory / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_max_length": 77}))
    assert tokenizer_from_dir(directory).model_max_length == 77 and len(loads) == 2


def test_a_spare_copy_goes_to_the_next_caller_uncopied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``arena preload``'s server makes before it forks: each child's first load is the
    copy made ahead, taken as it is; the next one is a copy again, unchanged by the first."""
    directory = tmp_path / "tokenizer"
    shutil.copytree(smollm2_tokenizer_dir(), directory)
    locate.keep_spare_tokenizer(directory)
    copies: list[object] = []
    deepcopy = locate.copy.deepcopy
    monkeypatch.setattr(locate.copy, "deepcopy", lambda x: copies.append(x) or deepcopy(x))
    first = tokenizer_from_dir(directory)
    assert copies == []
    first.padding_side = "left" if first.padding_side == "right" else "right"
    second = tokenizer_from_dir(directory)
    assert len(copies) == 1 and second is not first
    assert second.padding_side != first.padding_side
    assert first.encode("bet or check?") == second.encode("bet or check?")
