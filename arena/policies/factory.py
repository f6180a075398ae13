"""Build a policy from config: :class:`PolicyConfig` and :func:`make_policy`.

Backends are registered as lazy ``"module:Class"`` strings, so choosing ``hf`` never imports
vLLM and ``remote`` never imports transformers. Each backend class has
``from_config(config) -> Policy``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from arena.policies.base import InvalidRequest, Policy, check_keys

BACKENDS: dict[str, str] = {
    "hf": "arena.policies.hf:HFPolicy",
    "vllm": "arena.policies.vllm:VLLMPolicy",
    "remote": "arena.policies.remote:RemotePolicy",
    "openai": "arena.policies.openai:OpenAIPolicy",
    "scripted": "arena.policies.scripted:ScriptedPolicy",
}
"""Backend name to the ``module:Class`` implementing it."""


@dataclass
class PolicyConfig:
    """Which policy to build and how. Fields a backend does not use are ignored by it."""

    backend: str = "hf"
    """One of :data:`BACKENDS`: ``hf``, ``vllm``, ``remote``, ``openai``, ``scripted``."""
    model: str = "smollm2-135m"
    """Model spec for ``hf``/``vllm`` (see :func:`arena.models.load_model`); the model name
    sent to an ``openai`` endpoint."""
    name: str = "main"
    """Policy name: an inference actor serves it as ``policy:<name>``; ``remote`` calls that."""
    dtype: str = "float32"
    """Weights and compute dtype for local backends: float32, bfloat16 or float16."""
    device: str = "cpu"
    """Torch device for ``hf`` (cpu, cuda, cuda:1, ...)."""
    max_batch: int = 64
    """Most prompts one local forward pass decodes together."""
    attention: str = "auto"
    """``hf``: the attention kernel (``eager``, ``sdpa``, ...); ``auto`` is eager on CPU, where
    it decodes batches faster, and the model's default elsewhere."""
    seed: int = 0
    """Seed of the sampler for requests that bring no seed of their own."""
    address: str | None = None
    """``remote``: the broker address (ipc:// or tcp://)."""
    timeout: float = 120.0
    """``remote``/``openai``: seconds to wait for one reply before failing."""
    base_url: str | None = None
    """``openai``: endpoint root, e.g. ``http://127.0.0.1:8000/v1``."""
    api_key_env: str = "OPENAI_API_KEY"
    """``openai``: the environment variable holding the key (configs never hold keys)."""
    bot: str | None = None
    """``scripted``: ``"module:Factory"`` of a bot with ``act(env, agent)`` or a callable."""
    engine: dict[str, Any] = field(default_factory=dict)
    """``vllm``: extra keyword arguments for ``vllm.LLM`` (e.g. ``max_model_len``)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyConfig:
        check_keys(data, [f.name for f in fields(cls)], "policy config")
        return cls(**data)


def backend_class(backend: str) -> type[Policy]:
    if backend not in BACKENDS:
        near = difflib.get_close_matches(backend, list(BACKENDS), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise InvalidRequest(f"unknown policy backend {backend!r}{hint} (have {sorted(BACKENDS)})")
    module, _, attr = BACKENDS[backend].partition(":")
    return getattr(importlib.import_module(module), attr)


def make_policy(config: PolicyConfig | Mapping[str, Any]) -> Policy:
    """Build the policy a config describes."""
    if not isinstance(config, PolicyConfig):
        config = PolicyConfig.from_dict(config)
    return backend_class(config.backend).from_config(config)  # type: ignore[attr-defined]


def load_object(path: str) -> Any:
    """``"package.module:attr"`` to the object (how configs name bots and actors)."""
    from games.registry import RegistryError
    from games.registry import load_object as resolve

    try:
        return resolve(path)
    except RegistryError as err:
        raise InvalidRequest(str(err)) from None
