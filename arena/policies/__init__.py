"""Policies: prompts in; sampled token ids, their logprobs, text and version out.

- :mod:`arena.policies.base`: :class:`Policy`, :class:`Prompt`, :class:`SamplingParams`,
  :class:`Generation` and the errors.
- :mod:`arena.policies.chat`: chat templates and token-in/token-out continuation.
- Backends, one module each, imported lazily by :func:`make_policy`: ``hf`` (transformers),
  ``vllm``, ``remote`` (an inference actor over the bus), ``openai`` (HTTP), ``scripted``
  (reference bots and scripts).
"""

from arena.policies.base import (
    ContextOverflow,
    Generation,
    InvalidRequest,
    Policy,
    PolicyError,
    Prompt,
    PromptLike,
    SamplingParams,
    as_prompt,
)
from arena.policies.factory import BACKENDS, PolicyConfig, make_policy

__all__ = ["BACKENDS", "ContextOverflow", "Generation", "InvalidRequest", "Policy", "PolicyConfig",
           "PolicyError", "Prompt", "PromptLike", "SamplingParams", "as_prompt", "make_policy"]  # fmt: skip
