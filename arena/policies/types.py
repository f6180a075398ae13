"""What flows through a policy: prompts and sampling params in; generations out; the errors.

Every backend (``hf``, ``vllm``, ``remote``, ``openai``, ``scripted``) implements
:class:`Policy`. A prompt is a :class:`Prompt`: chat ``messages`` rendered with the model's chat
template, raw token ``ids``, or both, meaning "these ids (an earlier prompt plus the response
sampled for it), then these new messages" -- the token-in/token-out way to continue a seat's
conversation without re-tokenizing its history (see :mod:`arena.policies.chat`).

Each :class:`Generation` carries the exact ``prompt_ids`` the sampler saw, the sampled
``token_ids`` (an end-of-turn token included when one was sampled), the logprob of each sampled
token under the request's tempered, untruncated distribution ``log_softmax(logits / T)`` (T = 1
for greedy requests; what a learner with ``loss.temperature = T`` recomputes by teacher forcing),
the text, why generation stopped, and the policy version that produced it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from arena.core.errors import did_you_mean

FINISH_REASONS = frozenset({"stop", "length"})
"""``stop``: an end-of-turn token or a stop string; ``length``: ``max_new_tokens`` ran out."""


class PolicyError(RuntimeError):
    """A request a policy could not serve. ``code`` is also the bus error code."""

    code = "policy_error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or type(self).code


class InvalidRequest(PolicyError, ValueError):
    """A malformed prompt or invalid sampling parameters; the message names the field."""

    code = "bad_request"


class ContextOverflow(InvalidRequest):
    """A prompt that leaves no room to generate within the model's context window."""

    code = "context_overflow"


class UnknownAdapter(InvalidRequest):
    """A request for an adapter the policy does not hold; that request alone fails."""

    code = "unknown_adapter"


def check_keys(data: Mapping[str, Any], allowed: Sequence[str], what: str) -> None:
    """Reject unknown keys, naming the nearest valid one (a typo should not pass silently)."""
    for key in data:
        if key not in allowed:
            hint = did_you_mean(str(key), allowed) or f"; valid keys: {sorted(allowed)}"
            raise InvalidRequest(f"unknown {what} key {key!r}{hint}")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one request. Validated on construction."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (argmax)."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p."""
    top_k: int = 0
    """Keep only the k most likely tokens; 0 keeps all."""
    max_new_tokens: int = 128
    """Most tokens to generate (the context window may cut it shorter)."""
    stop: tuple[str, ...] = ()
    """Strings that end generation; the text is cut before them, the ids keep every sampled token."""
    stop_token_ids: tuple[int, ...] = ()
    """Token ids that end generation, besides the model's own end-of-turn tokens."""
    seed: int | None = None
    """Seed of this request's sampler, for reproducible samples; None draws from the policy's."""
    adapter: str | None = None
    """The named LoRA adapter on the served base that answers this request (a policy per
    role, :mod:`arena.models.lora`); None: the base model itself."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        checks = [
            (
                _is_number(self.temperature) and 0 <= self.temperature <= 100,
                "temperature must be in [0, 100]",
            ),
            (_is_number(self.top_p) and 0 < self.top_p <= 1, "top_p must be in (0, 1]"),
            (_is_int(self.top_k) and self.top_k >= 0, "top_k must be an int >= 0 (0 = off)"),
            (
                _is_int(self.max_new_tokens) and self.max_new_tokens >= 1,
                "max_new_tokens must be an int >= 1",
            ),
            (all(isinstance(s, str) and s for s in self.stop), "stop must be non-empty strings"),
            (
                all(_is_int(t) and t >= 0 for t in self.stop_token_ids),
                "stop_token_ids must be ints >= 0",
            ),
            (self.seed is None or _is_int(self.seed), "seed must be an int or None"),
            (
                self.adapter is None or (isinstance(self.adapter, str) and self.adapter != ""),
                "adapter must be a non-empty string or None",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidRequest(f"invalid sampling params: {message}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop"], data["stop_token_ids"] = list(self.stop), list(self.stop_token_ids)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> SamplingParams:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InvalidRequest(f"sampling params must be a map, got {type(data).__name__}")
        check_keys(data, [f.name for f in fields(cls)], "sampling params")
        try:
            return cls(**data)
        except TypeError as err:
            raise InvalidRequest(f"invalid sampling params: {err}") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Prompt:
    """What to generate from: chat messages, token ids, or ids followed by new messages."""

    messages: tuple[Mapping[str, str], ...] | None = None
    """Chat messages ({"role", "content"}), rendered with the chat template and a generation
    prompt. With ``ids`` set, only these new messages are rendered and appended."""
    ids: np.ndarray | None = None
    """int32 token ids: the whole prompt, or (with ``messages``) an earlier prompt plus the
    response sampled for it."""

    def __post_init__(self) -> None:
        if self.messages is None and self.ids is None:
            raise InvalidRequest("a prompt needs messages, ids, or both")
        if self.messages is not None:
            messages = tuple(self.messages)
            for i, message in enumerate(messages):
                if not (
                    isinstance(message, Mapping)
                    and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)
                ):
                    raise InvalidRequest(
                        f"message {i} must be a map with string 'role' and 'content'"
                    )
            object.__setattr__(self, "messages", messages)
        if self.ids is not None:
            object.__setattr__(self, "ids", as_token_ids(self.ids, "prompt ids"))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.messages is not None:
            data["messages"] = [dict(m) for m in self.messages]
        if self.ids is not None:
            data["ids"] = self.ids
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Prompt:
        if not isinstance(data, Mapping):
            raise InvalidRequest(f"a prompt must be a map, got {type(data).__name__}")
        check_keys(data, ["messages", "ids"], "prompt")
        messages = data.get("messages")
        if messages is not None and not isinstance(messages, (list, tuple)):
            raise InvalidRequest("prompt messages must be a list")
        return cls(messages=messages, ids=data.get("ids"))


PromptLike = Prompt | Sequence[Mapping[str, str]] | Sequence[int] | np.ndarray
"""A :class:`Prompt`, a list of chat messages, or a sequence of token ids."""


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor, without importing torch: one can exist only where
    torch was imported, and reading a config must not pay for torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def as_prompt(prompt: PromptLike) -> Prompt:
    if isinstance(prompt, Prompt):
        return prompt
    if isinstance(prompt, np.ndarray) or is_tensor(prompt):
        return Prompt(ids=np.asarray(prompt))
    if isinstance(prompt, Sequence) and not isinstance(prompt, str | bytes):
        if all(isinstance(m, Mapping) for m in prompt) and len(prompt) > 0:
            return Prompt(messages=prompt)  # type: ignore[arg-type]
        return Prompt(ids=np.asarray(prompt))
    raise InvalidRequest(
        f"a prompt is a Prompt, chat messages or token ids, not {type(prompt).__name__}"
    )


def as_token_ids(value: Any, what: str = "token ids") -> np.ndarray:
    """A 1-D int32 array of token ids, or :class:`InvalidRequest` naming ``what``."""
    array = value.numpy() if is_tensor(value) else np.asarray(value)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InvalidRequest(
            f"{what} must be a 1-D array of ints, got {array.dtype}{list(array.shape)}"
        )
    if array.size and (array.min() < 0 or array.max() >= 2**31):
        raise InvalidRequest(f"{what} must be token ids >= 0")
    return array.astype(np.int32, copy=False)


@dataclass
class Generation:
    """One request's result."""

    prompt_ids: np.ndarray
    """int32 ids of the full prompt the sampler saw."""
    token_ids: np.ndarray
    """int32 ids of the sampled tokens, an end-of-turn token included when it was sampled."""
    logprobs: np.ndarray
    """float32 logprob of each sampled token under ``log_softmax(logits / T)``, the request's
    temperature, before top-k/top-p (T = 1 when greedy)."""
    text: str
    """The decoded response, special tokens skipped, cut before a matched stop string."""
    finish_reason: str
    """``stop`` or ``length`` (see :data:`FINISH_REASONS`)."""
    version: int
    """The policy version whose weights produced every token."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific details (e.g. a scripted bot's action), msgpack-able."""

    @property
    def conversation_ids(self) -> np.ndarray:
        """Prompt then response: the ``ids`` of the seat's next :class:`Prompt`."""
        return np.concatenate([self.prompt_ids, self.token_ids]).astype(np.int32, copy=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> Generation:
        if not isinstance(data, Mapping):
            raise PolicyError(f"a generation must be a map, got {type(data).__name__}", "malformed")
        try:
            return cls(
                prompt_ids=as_token_ids(data["prompt_ids"], "prompt_ids"),
                token_ids=as_token_ids(data["token_ids"], "token_ids"),
                logprobs=np.asarray(data["logprobs"], dtype=np.float32),
                text=str(data["text"]),
                finish_reason=str(data["finish_reason"]),
                version=int(data["version"]),
                extra=dict(data.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise PolicyError(f"malformed generation: {err!r}", "malformed") from None


def per_request(
    params: SamplingParams | Sequence[SamplingParams] | None, n: int
) -> list[SamplingParams]:
    """One :class:`SamplingParams` per request (a single one is shared by all)."""
    if params is None:
        return [SamplingParams()] * n
    if isinstance(params, SamplingParams):
        return [params] * n
    params = list(params)
    if len(params) != n:
        raise InvalidRequest(f"{n} prompts but {len(params)} sampling params")
    return params


@dataclass
class Scoring:
    """One scoring request's result: the log-probability of each token of each continuation
    after the prompt, under the untempered distribution ``log_softmax(logits)`` (a caller that
    chooses among the continuations applies its own temperature to their sums)."""

    prompt_ids: np.ndarray
    """int32 ids of the full prompt the continuations were scored after."""
    logprobs: list[np.ndarray]
    """float32 per-token logprobs of each continuation, in request order."""
    version: int
    """The policy version whose weights scored every continuation."""

    @property
    def sums(self) -> np.ndarray:
        """Each continuation's sequence log-probability (float64)."""
        return np.array([float(np.sum(lp, dtype=np.float64)) for lp in self.logprobs])

    def to_dict(self) -> dict[str, Any]:
        lengths = np.array([len(lp) for lp in self.logprobs], dtype=np.int32)
        flat = np.concatenate(self.logprobs) if self.logprobs else np.zeros(0, np.float32)
        return {
            "prompt_ids": self.prompt_ids,
            "logprobs": flat.astype(np.float32, copy=False),
            "lengths": lengths,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Scoring:
        if not isinstance(data, Mapping):
            raise PolicyError(f"a scoring must be a map, got {type(data).__name__}", "malformed")
        try:
            flat = np.asarray(data["logprobs"], dtype=np.float32)
            lengths = as_token_ids(data["lengths"], "lengths")
            if int(lengths.sum()) != len(flat):
                raise ValueError(f"lengths add up to {int(lengths.sum())}, not {len(flat)}")
            return cls(
                prompt_ids=as_token_ids(data["prompt_ids"], "prompt_ids"),
                logprobs=np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else [],
                version=int(data["version"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise PolicyError(f"malformed scoring: {err!r}", "malformed") from None


MAX_CONTINUATIONS = 1024
"""The most continuations one scoring request may carry."""


def as_continuations(value: Any) -> list[np.ndarray]:
    """A scoring request's continuations as int32 id arrays, or :class:`InvalidRequest`."""
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidRequest("continuations must be a non-empty list of token id arrays")
    if len(value) > MAX_CONTINUATIONS:
        raise InvalidRequest(
            f"{len(value)} continuations in one request; at most {MAX_CONTINUATIONS}"
        )
    out = [as_token_ids(c, f"continuation {i}") for i, c in enumerate(value)]
    for i, ids in enumerate(out):
        if len(ids) == 0:
            raise InvalidRequest(f"continuation {i} is empty")
    return out
