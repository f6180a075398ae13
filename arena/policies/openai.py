"""A policy behind any OpenAI-compatible HTTP endpoint (vLLM serve, llama.cpp, hosted APIs).

Chat prompts go to ``POST {base_url}/chat/completions`` with ``logprobs: true``; token-id
prompts go to ``POST {base_url}/completions`` with the ids as the prompt (the API accepts token
arrays) and ``logprobs: 0``. Requests run concurrently on a small thread pool; stdlib ``urllib``
only, no client library.

Token ids: endpoints return token strings, not ids. When the reply carries ids (vLLM with
``return_tokens_as_token_ids``: tokens like ``"token_id:42"``) they are used; otherwise, with a
tokenizer, the text is re-tokenized, which may differ from what was sampled. This backend is
for evaluation and opponents, not for collecting training data.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from arena.policies.base import Policy
from arena.policies.config import PolicyConfig
from arena.policies.types import (
    Generation,
    InvalidRequest,
    PolicyError,
    Prompt,
    PromptLike,
    SamplingParams,
    as_prompt,
    per_request,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class OpenAIPolicy(Policy):
    """Sample from an OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        name: str = "openai",
        timeout: float = PolicyConfig.timeout,
        concurrency: int = 8,
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.name = name
        self.timeout = timeout
        self.tokenizer = tokenizer
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix=f"openai-{name}")

    @classmethod
    def from_config(cls, config: PolicyConfig) -> OpenAIPolicy:
        from arena.models import load_tokenizer

        if not config.base_url:
            raise InvalidRequest("an openai policy needs 'base_url', e.g. http://127.0.0.1:8000/v1")
        return cls(
            config.base_url,
            config.model,
            api_key=os.environ.get(config.api_key_env),
            name=config.name,
            timeout=config.timeout,
            tokenizer=load_tokenizer(config.tokenizer),  # to count a reply sent without ids
        )

    def generate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        all_params = per_request(params, len(prompts))
        jobs = [
            self._pool.submit(self._one, as_prompt(p), sp)
            for p, sp in zip(prompts, all_params, strict=True)
        ]
        return [job.result() for job in jobs]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one request -------------------------------------------------------------------------
    def _one(self, prompt: Prompt, params: SamplingParams) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if params.top_k:
            body["top_k"] = params.top_k  # an extension that vLLM and llama.cpp accept
        if prompt.ids is not None and prompt.messages is not None:
            raise InvalidRequest("the openai backend cannot continue token ids with new messages")
        if prompt.messages is not None:
            body.update(messages=[dict(m) for m in prompt.messages], logprobs=True)
            path = "/chat/completions"
            choice = self._post(path, body)
            reply = _Reply(self.base_url + path)
            text = reply.text(reply.field(choice, "message").get("content"), "content")
            entries = reply.items(reply.field(choice, "logprobs").get("content"), "content")
            tokens = [reply.text(reply.dict(e, "content").get("token"), "token") for e in entries]
            logprobs = [
                reply.number(reply.dict(e, "content").get("logprob"), "logprob") for e in entries
            ]
            prompt_ids = np.zeros(0, np.int32)
        else:
            assert prompt.ids is not None
            body.update(prompt=prompt.ids.tolist(), logprobs=0)
            path = "/completions"
            choice = self._post(path, body)
            reply = _Reply(self.base_url + path)
            text = reply.text(choice.get("text"), "text")
            info = reply.field(choice, "logprobs")
            tokens = [reply.text(t, "tokens") for t in reply.items(info.get("tokens"), "tokens")]
            logprobs = [
                reply.number(x, "token_logprobs")
                for x in reply.items(info.get("token_logprobs"), "token_logprobs")
            ]
            prompt_ids = prompt.ids
        return Generation(
            prompt_ids=prompt_ids,
            token_ids=reply.token_ids(tokens, text, self.tokenizer),
            logprobs=np.asarray(logprobs, dtype=np.float32),
            text=text,
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            version=self.version,
            extra={"exact_ids": all(t.startswith("token_id:") for t in tokens)},
        )

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.base_url + path, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            code = "bad_request" if 400 <= err.code < 500 else "policy_error"
            raise PolicyError(
                f"{self.base_url}{path} answered HTTP {err.code}: {detail}", code
            ) from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise PolicyError(f"cannot reach {self.base_url}{path}: {err}", "unreachable") from None
        except json.JSONDecodeError:
            raise PolicyError(f"{self.base_url}{path} did not answer JSON", "malformed") from None
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise PolicyError(f"{self.base_url}{path} answered without choices", "malformed")
        return choices[0]


class _Reply:
    """Reads one choice of an endpoint's answer: a field of the wrong type is a ``PolicyError``
    (code ``malformed``) naming the endpoint and the field, never an ``AttributeError`` from deep
    in the parsing or a reply whose ``text`` is not a string. An absent or null field is empty."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _bad(self, name: str, value: Any, wanted: str) -> PolicyError:
        shown = json.dumps(value)[:80]  # it came from JSON
        return PolicyError(
            f"{self.url} answered a malformed choice: {name!r} must be {wanted}, not {shown}",
            "malformed",
        )

    def dict(self, value: Any, name: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self._bad(name, value, "an object")
        return value

    def field(self, choice: dict[str, Any], name: str) -> dict[str, Any]:
        value = choice.get(name)
        return {} if value is None else self.dict(value, name)

    def items(self, value: Any, name: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._bad(name, value, "a list")
        return value

    def text(self, value: Any, name: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._bad(name, value, "a string")
        return value

    def number(self, value: Any, name: str) -> float:
        if value is None:
            return 0.0  # the API's null logprob (a prompt's first token)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad(name, value, "a number")
        return float(value)

    def token_ids(
        self, tokens: list[str], text: str, tokenizer: PreTrainedTokenizerBase | None
    ) -> np.ndarray:
        """The ids of ``tokens`` where the endpoint sent ids (``token_id:42``), else ``text``
        tokenized again (empty without a tokenizer)."""
        if tokens and all(t.startswith("token_id:") for t in tokens):
            raw = [t.removeprefix("token_id:") for t in tokens]
            if not all(r.isdecimal() for r in raw):
                bad = next(t for t, r in zip(tokens, raw, strict=True) if not r.isdecimal())
                raise self._bad("token", bad, "'token_id:' and a number")
            return np.asarray([int(r) for r in raw], dtype=np.int32)
        if tokenizer is not None:
            return np.asarray(tokenizer.encode(text, add_special_tokens=False), dtype=np.int32)
        return np.zeros(0, np.int32)
