"""Policies: prompts in; sampled token ids, their logprobs, text and version out.

- :mod:`arena.policies.base`: :class:`Policy`, :class:`Prompt`, :class:`SamplingParams`,
  :class:`Generation` and the errors.
- :mod:`arena.policies.chat`: chat templates and token-in/token-out continuation.
- Backends, one module each, registered in :data:`backends` and imported lazily by :func:`make_policy`: ``hf`` (transformers),
  ``vllm``, ``remote`` (an inference actor over the bus), ``openai`` (HTTP), ``scripted``
  (reference bots and scripts).
"""

from arena.policies.base import Policy
from arena.policies.config import InferenceConfig, PolicyConfig
from arena.policies.factory import backends, make_policy
from arena.policies.types import (
    ContextOverflow,
    Generation,
    InvalidRequest,
    PolicyError,
    Prompt,
    PromptLike,
    SamplingParams,
    UnknownAdapter,
    as_prompt,
)

__all__ = [
    "backends",
    "ContextOverflow",
    "Generation",
    "InvalidRequest",
    "InferenceConfig",
    "Policy",
    "PolicyConfig",
    "PolicyError",
    "Prompt",
    "PromptLike",
    "SamplingParams",
    "UnknownAdapter",
    "as_prompt",
    "make_policy",
]
