"""Chat templates and token-in/token-out continuation with SmolLM2's real tokenizer.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_chat.py``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.policies.types import InvalidRequest, Prompt, SamplingParams

FIRST = [{"role": "system", "content": "You play Nim."}, {"role": "user", "content": "Your move?"}]
SECOND = [{"role": "user", "content": "I took 2. Your move?"}]


def full_render(fmt: ChatFormat, reply: str) -> np.ndarray:
    return fmt.encode_text(fmt.render([*FIRST, {"role": "assistant", "content": reply}, *SECOND]))


def test_model_template_renders_smollm2_chatml(tiny_tokenizer) -> None:
    fmt = ChatFormat(tiny_tokenizer)
    ids = fmt.prompt_ids(Prompt(messages=FIRST))
    text = tiny_tokenizer.decode(ids.tolist())
    assert text.startswith("<|im_start|>system\nYou play Nim.<|im_end|>\n")
    assert text.endswith("<|im_start|>assistant\n")


def test_extend_after_a_sampled_end_of_turn_matches_a_full_render(tiny_tokenizer) -> None:
    fmt = ChatFormat(tiny_tokenizer)
    prompt = fmt.prompt_ids(Prompt(messages=FIRST))
    response = np.concatenate(
        [fmt.encode_text("Take 3."), [tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")]]
    )
    extended = fmt.extend(np.concatenate([prompt, response]), SECOND)
    assert extended[: len(prompt) + len(response)].tolist() == [*prompt, *response]
    assert extended.tolist() == full_render(fmt, "Take 3.").tolist()


def test_extend_closes_a_turn_that_stopped_early(tiny_tokenizer) -> None:
    fmt = ChatFormat(tiny_tokenizer)
    prompt = fmt.prompt_ids(Prompt(messages=FIRST))
    response = fmt.encode_text("Take 3.")  # cut by a stop string or the token budget: no <|im_end|>
    extended = fmt.extend(np.concatenate([prompt, response]), SECOND)
    assert extended.tolist() == full_render(fmt, "Take 3.").tolist()
    with pytest.raises(InvalidRequest, match="at least one"):
        fmt.extend(prompt, [])


def test_ids_that_retokenize_differently_are_kept(tiny_tokenizer) -> None:
    fmt = ChatFormat(tiny_tokenizer)
    prompt = fmt.prompt_ids(Prompt(messages=FIRST))
    # "Take" spelled letter by letter: the text re-tokenizes to other ids; the sampled ones stay.
    odd = np.array([tiny_tokenizer.convert_tokens_to_ids(c) for c in "Take"], dtype=np.int32)
    assert fmt.encode_text("Take").tolist() != odd.tolist()
    extended = fmt.extend(np.concatenate([prompt, odd]), SECOND)
    assert extended[len(prompt) : len(prompt) + 4].tolist() == odd.tolist()


def test_fallback_template_is_chatml(tiny_tokenizer) -> None:
    bare = copy.deepcopy(tiny_tokenizer)
    bare.chat_template = None
    fmt = ChatFormat(bare)
    text = fmt.render([{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_policy_continues_a_seat_without_retokenizing(tiny_model) -> None:
    policy = HFPolicy(*tiny_model)
    params = SamplingParams(max_new_tokens=6, seed=0)
    first = policy.generate([FIRST], params)[0]
    second = policy.generate([Prompt(ids=first.conversation_ids, messages=SECOND)], params)[0]
    assert (
        second.prompt_ids[: len(first.conversation_ids)].tolist() == first.conversation_ids.tolist()
    )
    tail = policy.tokenizer.decode(second.prompt_ids[len(first.conversation_ids) :].tolist())
    assert tail.endswith(
        "<|im_start|>user\nI took 2. Your move?<|im_end|>\n<|im_start|>assistant\n"
    )
