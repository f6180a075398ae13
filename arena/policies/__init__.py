"""Policies: prompts in; sampled token ids, their logprobs, text and version out.

- :mod:`arena.policies.base`: :class:`Policy`, :class:`Prompt`, :class:`SamplingParams`,
  :class:`Generation` and the errors.
- :mod:`arena.policies.chat`: chat templates and token-in/token-out continuation.
- Backends, one module each, registered in :data:`backends` and imported lazily by :func:`make_policy`: ``hf`` (transformers),
  ``vllm``, ``remote`` (an inference actor over the bus), ``openai`` (HTTP), ``scripted``
  (reference bots and scripts).
"""

from arena.core.lazy import lazy_exports

_EXPORTS = {
    "Policy": "base",
    "InferenceConfig": "config",
    "PolicyConfig": "config",
    "backends": "factory",
    "make_policy": "factory",
    "ContextOverflow": "types",
    "Generation": "types",
    "InvalidRequest": "types",
    "PolicyError": "types",
    "Prompt": "types",
    "PromptLike": "types",
    "SamplingParams": "types",
    "UnknownAdapter": "types",
    "as_prompt": "types",
}
"""Each public name -> the module that defines it, imported on first use: the config alone
imports no torch."""
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
