"""An adapter's shape and its defaults: what a config names, read without torch.

:class:`AdapterShape` (built from a LoRA config by :meth:`AdapterShape.of`) and the one set of
defaults (:data:`DEFAULT_RANK`, :data:`DEFAULT_ALPHA`, :data:`DEFAULT_TARGET_MODULES`) that
``learner.lora``, the policies and the vLLM engine read. The layers, routing and layout that
use them are in :mod:`arena.models.lora`; this part stands apart so that loading a run config (``arena train --dry-run``, a config error) imports no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from arena.core.errors import ConfigError

SHARED_ADAPTER = "shared-lora"
"""The name the one adapter of a shared policy (``learner.lora``) is served under, unmerged,
as every request's adapter (:attr:`arena.policies.config.PolicyConfig.default_adapter`)."""


class AdapterError(ConfigError):
    """An adapter that cannot be used here: unknown, malformed, or made for another base."""


DEFAULT_RANK = 8
"""An adapter's rank unless told otherwise (``learner.lora.r``, :class:`AdapterShape`)."""
DEFAULT_ALPHA = 16
"""An adapter's scaling numerator unless told otherwise: ``alpha / r`` = 2."""
DEFAULT_TARGET_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""The layers an adapter adapts unless told otherwise: every linear layer of a Llama-style block
(SmolLM2's names), never ``lm_head`` (the vllm backend cannot adapt it, see
:mod:`arena.policies.vllm`). The one default: ``learner.lora``, :class:`AdapterShape` and a vLLM
engine started with ``enable_lora`` and no ``lora_target_modules`` all read it here."""


class LoRASettings(Protocol):
    """What :meth:`AdapterShape.of` reads: a LoRA config such as ``learner.lora``."""

    @property
    def r(self) -> int: ...
    @property
    def alpha(self) -> float: ...
    @property
    def target_modules(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class AdapterShape:
    """The shape every adapter of one model shares."""

    r: int = DEFAULT_RANK
    """Rank of each low-rank pair."""
    alpha: float = float(DEFAULT_ALPHA)
    """Scaling numerator: the update is ``alpha / r`` times ``B A``."""
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    """Names of the linear layers that get adapters (the last part of the module name)."""

    @classmethod
    def of(cls, lora: LoRASettings) -> AdapterShape:
        """The shape a LoRA config names (``learner.lora``: its r, alpha and target_modules)."""
        return cls(lora.r, float(lora.alpha), tuple(lora.target_modules))

    @property
    def scale(self) -> float:
        return self.alpha / self.r


DEFAULT_SHAPE = AdapterShape()
"""The shape of an adapter whose config names nothing: the defaults above."""
