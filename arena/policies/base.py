"""The policy interface: prompts in; sampled token ids, their logprobs and text out.

Every backend (``hf``, ``vllm``, ``remote``, ``openai``, ``scripted``) implements
:class:`Policy`. Backends that can also *score* (``hf``, ``vllm``, ``remote``) implement
:meth:`Policy.score`: the log-probability of each of N given continuations of one prompt, which
is what a seat that chooses among its legal replies needs (:mod:`arena.play.choice`); what flows through one (:class:`~arena.policies.types.Prompt`,
:class:`~arena.policies.types.SamplingParams`, :class:`~arena.policies.types.Generation` and
the errors) is defined in :mod:`arena.policies.types`.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from arena.policies.chat import ChatFormat
from arena.policies.types import (
    ContextOverflow,
    Generation,
    InvalidRequest,
    PolicyError,
    Prompt,
    PromptLike,
    SamplingParams,
    Scoring,
    UnknownAdapter,
    as_continuations,
    as_prompt,
)

if TYPE_CHECKING:  # torch only for annotations: a config reads this module without it
    import torch


class Policy(ABC):
    """Samples responses for a batch of prompts. Subclasses implement :meth:`generate`."""

    name: str = "policy"
    version: int = 0
    chat: ChatFormat | None = None
    """Renders chat prompts to ids; None for backends that take messages as they are."""
    max_context: int | None = None
    """Context window in tokens, where the backend knows it."""

    def adapters(self) -> tuple[str, ...]:
        """The named adapters this policy serves beside its base (none by default)."""
        return ()

    def check_adapter(self, adapter: str | None) -> None:
        """Refuse a request for an adapter this policy does not hold."""
        if adapter is None:
            return
        held = self.adapters()
        if adapter not in held:
            raise UnknownAdapter(
                f"{self.name} holds no adapter named {adapter!r}"
                + (f"; it holds {', '.join(held)}" if held else "; it serves its base model only")
            )

    def prepare(self, prompt: PromptLike, params: SamplingParams) -> Prompt:
        """Validate one request before it joins a batch: render it to ids where the policy
        has a chat format, and refuse a prompt that leaves no room to generate or that asks
        for an adapter the policy does not hold."""
        self.check_adapter(params.adapter)
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

    def prepare_scoring(
        self, prompt: PromptLike, continuations: Sequence[Any], adapter: str | None = None
    ) -> tuple[Prompt, list[np.ndarray]]:
        """Validate one scoring request: the prompt as ids, and continuations that fit the
        context after it (a continuation that does not fit is refused, never truncated)."""
        replies = as_continuations(continuations)
        prompt = self.prepare(prompt, SamplingParams(max_new_tokens=1, adapter=adapter))
        if self.max_context is not None and prompt.ids is not None:
            longest = max(len(c) for c in replies)
            if len(prompt.ids) + longest > self.max_context:
                raise ContextOverflow(
                    f"a prompt of {len(prompt.ids)} tokens and a continuation of {longest} "
                    f"exceed the {self.max_context}-token context"
                )
        return prompt, replies

    def score(
        self,
        prompts: Sequence[PromptLike],
        continuations: Sequence[Sequence[Any]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[Scoring]:
        """For each prompt, the per-token log-probabilities (untempered) of each of its
        continuations, all under one policy version; ``adapters[i]`` names the adapter that
        scores prompt ``i`` (None: the base). Backends that cannot score raise
        :class:`PolicyError` (code ``unsupported``)."""
        raise PolicyError(
            f"the {type(self).__name__} backend cannot score continuations, so it cannot play "
            "a seat with act: choice (use act: generate)",
            "unsupported",
        )

    async def ascore(
        self,
        prompts: Sequence[PromptLike],
        continuations: Sequence[Sequence[Any]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[Scoring]:
        """:meth:`score` for asyncio callers; the default runs it on a worker thread."""
        return await asyncio.to_thread(self.score, prompts, continuations, adapters)

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """The parameters a weight update must match (names, shapes, dtypes)."""
        raise NotImplementedError(f"{type(self).__name__} has no weights to update")

    def update_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights in place (no restart) and take their version. A delta update
        (:meth:`separable_weights`) names only some of the tensors; the rest keep serving."""
        raise NotImplementedError(f"{type(self).__name__} does not take weight updates")

    def separable_weights(self) -> frozenset[str]:
        """Tensors of :meth:`state_dict` that stand alone, so that an update carrying what
        changed since the served version (a delta) may leave them out; empty (the default):
        every update carries every tensor."""
        return frozenset()

    def close(self) -> None:  # noqa: B027 -- optional hook: most policies hold nothing
        """Release engines, sockets or threads; the default has none."""

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
