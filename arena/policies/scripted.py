"""Scripted policies: reference bots and text scripts behind the :class:`Policy` interface.

A seat can be filled by a bot instead of a model. This adapter takes

- ``bot``: any object with ``act(env, agent) -> action`` (the games' reference bots), or a
  plain callable ``(env, agent) -> action``; call :meth:`ScriptedPolicy.act` or
  :meth:`ScriptedPolicy.generate_for`, which also renders the action as text through the env's
  ``action_to_text`` when it has one;
- ``respond``: a callable ``(messages) -> str`` for text-only seats (a scripted user in tests);
  :meth:`ScriptedPolicy.generate` calls it for chat prompts.

Scripted output is never trained on: logprobs are zero, the version stays 0, and token ids are
filled in only when a tokenizer is given (for length accounting), never sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from arena.policies.base import Policy
from arena.policies.types import Generation, InvalidRequest, PromptLike, SamplingParams, as_prompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from arena.policies.config import PolicyConfig


class Bot(Protocol):
    def act(self, env: Any, agent: str) -> Any: ...


Responder = Callable[[list[Mapping[str, str]]], str]


class ScriptedPolicy(Policy):
    """A bot or a text script as a policy."""

    def __init__(
        self,
        bot: Bot | Callable[[Any, str], Any] | None = None,
        *,
        respond: Responder | None = None,
        name: str = "scripted",
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> None:
        if bot is None and respond is None:
            raise ValueError("a scripted policy needs a bot (act(env, agent)) or respond(messages)")
        if bot is not None and not (hasattr(bot, "act") or callable(bot)):
            raise TypeError(
                f"bot must have act(env, agent) or be callable, got {type(bot).__name__}"
            )
        self.bot = bot
        self.respond = respond
        self.name = name
        self.tokenizer = tokenizer

    @classmethod
    def from_config(cls, config: PolicyConfig) -> ScriptedPolicy:
        from arena.policies.factory import load_object

        if not config.bot:
            raise InvalidRequest("a scripted policy needs 'bot', a 'module:Factory' path")
        factory = load_object(config.bot)
        # A class or factory function builds the bot; a bot instance is used as it is.
        bot = factory() if isinstance(factory, type) else factory
        return cls(bot, name=config.name)

    def act(self, env: Any, agent: str) -> Any:
        """The bot's action for ``agent`` in ``env``."""
        if self.bot is None:
            raise InvalidRequest(f"{self.name} is a text script; it has no act(env, agent)")
        act = self.bot.act if hasattr(self.bot, "act") else self.bot
        return act(env, agent)

    def generate_for(self, env: Any, agent: str) -> Generation:
        """The bot's action as a :class:`Generation` (``extra["action"]`` holds the action)."""
        action = self.act(env, agent)
        to_text = getattr(env, "action_to_text", None)
        text = to_text(agent, action) if callable(to_text) else str(action)
        return self._generation(np.zeros(0, np.int32), text, {"action": _plain(action)})

    def generate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        if self.respond is None:
            raise InvalidRequest(f"{self.name} acts on a game env: call generate_for(env, agent)")
        results = []
        for raw in prompts:
            prompt = as_prompt(raw)
            if prompt.messages is None:
                raise InvalidRequest("a scripted responder needs chat messages, not token ids")
            ids = prompt.ids if prompt.ids is not None else np.zeros(0, np.int32)
            results.append(self._generation(ids, self.respond(list(prompt.messages)), {}))
        return results

    def _generation(self, prompt_ids: np.ndarray, text: str, extra: dict[str, Any]) -> Generation:
        ids = self.tokenizer.encode(text, add_special_tokens=False) if self.tokenizer else []
        return Generation(
            prompt_ids=prompt_ids,
            token_ids=np.asarray(ids, dtype=np.int32),
            logprobs=np.zeros(len(ids), dtype=np.float32),
            text=text,
            finish_reason="stop",
            version=self.version,
            extra=extra,
        )


def _plain(action: Any) -> Any:
    """numpy scalars to Python ones, so the action can travel in a msgpack body."""
    return action.item() if isinstance(action, np.generic) else action
