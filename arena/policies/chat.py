"""Chat prompts as token ids, and token-in/token-out continuation of a seat's conversation.

:class:`ChatFormat` renders messages with the tokenizer's own chat template (a transformers
tokenizer, or :func:`arena.models.chat_tokenizer`'s, which gives the same ids without importing
transformers). A tokenizer without one gets :data:`FALLBACK_TEMPLATE`, ChatML
(``<|im_start|>role\\ncontent<|im_end|>\\n``), which is what SmolLM2 and many small instruct
models use.

A seat's second turn must not re-tokenize its first: the learner trains on the ids the sampler
saw, and re-tokenizing decoded text can give different ids. :meth:`ChatFormat.extend` appends
new messages to ``prompt_ids + response_ids`` as ids, bridging with exactly what the template puts
after an assistant message (e.g. ``\\n`` after a sampled ``<|im_end|>``, or the whole
``<|im_end|>\\n`` when generation stopped on a stop string or ran out of tokens)::

    first = policy.generate([Prompt(messages=[system, user])])[0]
    second = policy.generate([Prompt(ids=first.conversation_ids, messages=[next_user])])[0]
    # second.prompt_ids starts with first.prompt_ids + first.token_ids, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from arena.policies.types import InvalidRequest, Prompt, as_token_ids

if TYPE_CHECKING:  # the tokenizer is given, never made here: no transformers to import
    from transformers import PreTrainedTokenizerBase

    from arena.models.tokenizing import ChatTokenizer

FALLBACK_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML, used when the tokenizer has no chat template of its own."""

_SENTINEL = "\x00ARENA\x00"
_PROBE = ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})


class ChatFormat:
    """Turns :class:`Prompt` objects into token ids with one tokenizer's chat template."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase | ChatTokenizer) -> None:
        self.tokenizer = tokenizer
        self.template = tokenizer.chat_template or FALLBACK_TEMPLATE

    def render(self, messages: Sequence[Mapping[str, str]], generation_prompt: bool = True) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                chat_template=self.template,
                tokenize=False,
                add_generation_prompt=generation_prompt,
            )
        except Exception as err:  # jinja raises its own types for templates that reject input
            raise InvalidRequest(f"chat template rejected the messages: {err}") from None

    def encode_text(self, text: str) -> np.ndarray:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return np.asarray(ids, dtype=np.int32)

    def prompt_ids(self, prompt: Prompt) -> np.ndarray:
        """The ids the sampler sees for ``prompt``."""
        if prompt.messages is None:
            assert prompt.ids is not None
            return prompt.ids
        if prompt.ids is None:
            return self.encode_text(self.render(prompt.messages))
        return self.extend(prompt.ids, prompt.messages)

    def extend(
        self, conversation_ids: np.ndarray, messages: Sequence[Mapping[str, str]]
    ) -> np.ndarray:
        """``conversation_ids`` (an earlier prompt and its sampled response, untouched), then
        the end of the assistant turn if the response did not sample it, then ``messages``
        rendered by the template, then the generation prompt."""
        conversation_ids = as_token_ids(conversation_ids, "conversation ids")
        if not messages:
            raise InvalidRequest("extend needs at least one new message")
        closing = self._assistant_closing
        last = (
            self.tokenizer.decode(conversation_ids[-1:].tolist()) if len(conversation_ids) else ""
        )
        bridge = closing[len(last) :] if last and closing.startswith(last) else closing
        return np.concatenate([conversation_ids, self.encode_text(bridge + self._suffix(messages))])

    @cached_property
    def _assistant_closing(self) -> str:
        """What the template writes after an assistant message's content (``<|im_end|>\\n``)."""
        rendered = self.render([*_PROBE, {"role": "assistant", "content": _SENTINEL}], False)
        return rendered[rendered.index(_SENTINEL) + len(_SENTINEL) :]

    def _suffix(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The rendering of ``messages`` as they would follow an assistant turn."""
        history = [*_PROBE, {"role": "assistant", "content": _SENTINEL}]
        before = self.render(history, False)
        after = self.render([*history, *messages], True)
        if not after.startswith(before):
            raise InvalidRequest("the chat template does not render conversations append-only")
        return after[len(before) :]
