"""The policy interface: prompts in; sampled token ids, their logprobs and text out.

Every backend (``hf``, ``vllm``, ``remote``, ``openai``, ``scripted``) implements
:class:`Policy`; what flows through one (:class:`~arena.policies.types.Prompt`,
:class:`~arena.policies.types.SamplingParams`, :class:`~arena.policies.types.Generation` and
the errors) is defined in :mod:`arena.policies.types`.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

import torch

from arena.policies.chat import ChatFormat
from arena.policies.types import (
    ContextOverflow,
    Generation,
    InvalidRequest,
    Prompt,
    PromptLike,
    SamplingParams,
    as_prompt,
)


class Policy(ABC):
    """Samples responses for a batch of prompts. Subclasses implement :meth:`generate`."""

    name: str = "policy"
    version: int = 0
    chat: ChatFormat | None = None
    """Renders chat prompts to ids; None for backends that take messages as they are."""
    max_context: int | None = None
    """Context window in tokens, where the backend knows it."""

    def prepare(self, prompt: PromptLike, params: SamplingParams) -> Prompt:
        """Validate one request before it joins a batch: render it to ids where the policy
        has a chat format, and refuse a prompt that leaves no room to generate."""
        prompt = as_prompt(prompt)
        if self.chat is None:
            return prompt
        ids = self.chat.prompt_ids(prompt)
        if len(ids) == 0:
            raise InvalidRequest("empty prompt")
        if self.max_context is not None and len(ids) >= self.max_context:
            raise ContextOverflow(
                f"prompt of {len(ids)} tokens leaves no room in the {self.max_context}-token context"
            )
        return prompt if prompt.messages is None else Prompt(ids=ids)

    @abstractmethod
    def generate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        """Sample one response per prompt, in order. Raises :class:`InvalidRequest`."""

    async def agenerate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        """:meth:`generate` for asyncio callers; the default runs it on a worker thread."""
        return await asyncio.to_thread(self.generate, prompts, params)

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """The parameters a weight update must match (names, shapes, dtypes)."""
        raise NotImplementedError(f"{type(self).__name__} has no weights to update")

    def update_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights in place (no restart) and take their version."""
        raise NotImplementedError(f"{type(self).__name__} does not take weight updates")

    def close(self) -> None:  # noqa: B027 -- optional hook: most policies hold nothing
        """Release engines, sockets or threads; the default has none."""

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
