"""Build a policy from config: :func:`make_policy` of a :class:`~arena.policies.config.PolicyConfig`.

Backends live in :data:`backends`, a registry of lazy ``"module:Class"`` strings, so choosing
``hf`` never imports vLLM and ``remote`` never imports transformers. Each backend class has
``from_config(config) -> Policy``. Third-party backends register through the entry-point group
``arena.policies`` (the entry point's name is the backend name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arena.core.registry import Registry, RegistryError
from arena.core.registry import load_object as resolve
from arena.policies.config import PolicyConfig
from arena.policies.types import InvalidRequest

if TYPE_CHECKING:
    from arena.policies.base import Policy

backends: Registry[Policy] = Registry("policy backend", "arena.policies", versioned=False)
"""Backend name to the ``module:Class`` implementing it."""
backends.register("hf", "arena.policies.hf:HFPolicy")
backends.register("vllm", "arena.policies.vllm:VLLMPolicy")
backends.register("remote", "arena.policies.remote:RemotePolicy")
backends.register("openai", "arena.policies.openai:OpenAIPolicy")
backends.register("scripted", "arena.policies.scripted:ScriptedPolicy")


def backend_class(backend: str) -> type[Policy]:
    """The class of ``backend``; an unknown name (or a plugin backend that cannot be imported) is
    an :class:`InvalidRequest` naming the nearest names (or the import's error)."""
    try:
        return backends.load(backend)  # type: ignore[return-value]
    except RegistryError as err:
        raise InvalidRequest(str(err)) from None


def make_policy(config: PolicyConfig | Mapping[str, Any]) -> Policy:
    """Build the policy a config describes (an :class:`InferenceConfig` is one too)."""
    if not isinstance(config, PolicyConfig):
        config = PolicyConfig.from_dict(config)
    backend = config.backend

    def build() -> Policy:
        return backend_class(backend).from_config(config)  # type: ignore[attr-defined]

    # a plugin's backend that fails to import or to build: one line naming it (PluginFailed)
    return backends.building(backend, build)


def load_object(path: str) -> Any:
    """``"package.module:attr"`` to the object (how configs name bots and actors)."""
    try:
        return resolve(path)
    except RegistryError as err:
        raise InvalidRequest(str(err)) from None
