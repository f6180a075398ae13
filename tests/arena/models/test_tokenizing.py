"""The chat tokenizer without transformers gives what transformers' own tokenizer gives: the same
rendered templates, ids, decoded text and tokens; a directory it cannot read as transformers
would gets transformers' tokenizer; a rollout actor and a run's own process start without
importing transformers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.models import (
    ChatTokenizer,
    chat_tokenizer,
    load_tokenizer,
    smollm2_tokenizer_dir,
    tokenizing,
)
from arena.models.tokenizing import chat_tokenizer_from_dir
from arena.policies.chat import FALLBACK_TEMPLATE, ChatFormat
from arena.policies.types import InvalidRequest, Prompt
from tests.cli import python_probe

OURS = chat_tokenizer("tiny")
THEIRS = load_tokenizer("tiny")
CHATS = [
    [{"role": "system", "content": "You play Kuhn poker."}, {"role": "user", "content": "bet?"}],
    [{"role": "user", "content": "Ünïcode 🎲 and <|im_end|> typed by a user"}],
    [
        {"role": "user", "content": "  spaces\n\ttabs\n\n"},
        {"role": "assistant", "content": "<answer>(1, 2)</answer>"},
        {"role": "user", "content": "again"},
    ],
]
# a template with the special tokens, a filter and a loop control of transformers' environment
EXTRA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{% continue %}{% endif %}"
    "{{ m['role'] }}: {{ m['content'] | tojson }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def test_the_embedded_tokenizer_is_read_without_transformers() -> None:
    assert isinstance(OURS, ChatTokenizer)
    assert OURS.chat_template == THEIRS.chat_template
    assert OURS.special_tokens_map == THEIRS.special_tokens_map
    assert len(OURS) == len(THEIRS) == 49152


@pytest.mark.parametrize("template", [None, FALLBACK_TEMPLATE, EXTRA_TEMPLATE])
@pytest.mark.parametrize("generation_prompt", [True, False])
@pytest.mark.parametrize("chat", CHATS)
def test_templates_render_as_transformers_renders_them(
    chat: list[dict[str, str]], generation_prompt: bool, template: str | None
) -> None:
    options = {"chat_template": template, "add_generation_prompt": generation_prompt}
    text = THEIRS.apply_chat_template(chat, tokenize=False, **options)
    assert OURS.apply_chat_template(chat, tokenize=False, **options) == text
    tokenized = THEIRS.apply_chat_template(chat, tokenize=True, **options)
    assert OURS.apply_chat_template(chat, **options) == dict(tokenized)


def test_raise_exception_in_a_template_is_a_template_error() -> None:
    refusing = "{{ raise_exception('only users may speak') }}"
    tokenizer = chat_tokenizer("tiny")
    tokenizer.chat_template = refusing
    with pytest.raises(InvalidRequest, match="chat template rejected the messages: only users"):
        ChatFormat(tokenizer).render(CHATS[0])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_encodes_and_decodes_to_the_same_ids_and_text(text: str) -> None:
    ids = OURS(text, add_special_tokens=False)["input_ids"]
    assert ids == THEIRS(text, add_special_tokens=False)["input_ids"]
    assert OURS.encode(text) == THEIRS.encode(text)
    with_specials = [*ids, 0, 1, 2]  # <|endoftext|>, <|im_start|>, <|im_end|>
    for skip in (True, False):
        assert OURS.decode(with_specials, skip) == THEIRS.decode(with_specials, skip)


def test_tokens_by_id_are_transformers_tokens() -> None:
    ids = [0, 1, 2, 17, 300, 49151]
    assert OURS.convert_ids_to_tokens(ids) == THEIRS.convert_ids_to_tokens(ids)
    assert OURS.decode(5) == THEIRS.decode(5)


def test_a_seat_continues_its_conversation_with_the_same_ids() -> None:
    ours, theirs = ChatFormat(OURS), ChatFormat(THEIRS)
    first = Prompt(messages=CHATS[0])
    ids = ours.prompt_ids(first)
    assert ids.tolist() == theirs.prompt_ids(first).tolist()
    sampled = [*ids.tolist(), *OURS.encode("<answer>bet</answer>", add_special_tokens=False)]
    later = Prompt(ids=sampled, messages=[{"role": "user", "content": "and now?"}])
    assert ours.prompt_ids(later).tolist() == theirs.prompt_ids(later).tolist()


@pytest.mark.parametrize(
    "change",
    [
        {"tokenizer_class": "GPT2Tokenizer"},  # a class of its own: AutoTokenizer builds it
        {"clean_up_tokenization_spaces": True},  # decoding rewrites spaces
        {"chat_template": [{"name": "default", "template": "{{ messages }}"}]},  # named ones
    ],
)
def test_a_directory_it_cannot_read_alike_gets_transformers_tokenizer(
    tmp_path: Path, change: dict
) -> None:
    directory = tmp_path / "tokenizer"
    shutil.copytree(smollm2_tokenizer_dir(), directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps({**config, **change}))
    assert not isinstance(chat_tokenizer_from_dir(directory), ChatTokenizer)


def test_a_directory_without_a_template_says_so(tmp_path: Path) -> None:
    directory = tmp_path / "tokenizer"
    shutil.copytree(smollm2_tokenizer_dir(), directory)
    (directory / "chat_template.jinja").unlink()
    tokenizer = chat_tokenizer_from_dir(directory)
    assert isinstance(tokenizer, ChatTokenizer) and tokenizer.chat_template is None
    with pytest.raises(ValueError, match="has no chat template"):
        tokenizer.apply_chat_template(CHATS[0])
    # ChatFormat falls back to ChatML, as with transformers' tokenizer
    chatml = THEIRS.apply_chat_template(
        CHATS[0], chat_template=FALLBACK_TEMPLATE, tokenize=False, add_generation_prompt=True
    )
    assert ChatFormat(tokenizer).render(CHATS[0]) == chatml


def test_a_rollout_actor_and_a_runs_process_start_without_transformers() -> None:
    """Their tokenizer was transformers' only use there: 2.5 s of CPU at each start."""
    probe = (
        "import sys, arena.actors.rollout, arena.run.coordinator\n"
        "from arena.models import chat_tokenizer\n"
        "from arena.policies.chat import ChatFormat\n"
        "ChatFormat(chat_tokenizer('tiny')).render([{'role': 'user', 'content': 'hi'}])\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    assert python_probe(probe) == "[]"


def test_a_tokenizer_file_is_read_once_per_process_and_version(tmp_path: Path) -> None:
    """The ChatTokenizers of one file share what was read (encoding leaves it as it was); a
    rewritten file is read again."""
    directory = tmp_path / "tokenizer"
    shutil.copytree(smollm2_tokenizer_dir(), directory)
    first, second = chat_tokenizer_from_dir(directory), chat_tokenizer_from_dir(directory)
    assert first.backend_tokenizer is second.backend_tokenizer
    file = directory / "tokenizer.json"
    file.write_text(file.read_text() + "\n")
    third = chat_tokenizer_from_dir(directory)
    assert third.backend_tokenizer is not first.backend_tokenizer
    assert third.encode("Name a colour.") == first.encode("Name a colour.")


def test_preload_reads_the_cached_tokenizer_and_extracts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = smollm2_tokenizer_dir()
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokenizing, "_READ", {})
    tokenizing.preload()  # an empty cache: nothing read, nothing written
    assert tokenizing._READ == {} and list(tmp_path.iterdir()) == []
    shutil.copytree(cached, tmp_path / "tokenizers" / "smollm2-135m-instruct")
    tokenizing.preload()
    assert [key[0] for key in tokenizing._READ] == [
        str((tmp_path / "tokenizers" / "smollm2-135m-instruct" / "tokenizer.json").resolve())
    ]
