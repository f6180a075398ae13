"""The OpenAI-compatible backend against a stub HTTP server on 127.0.0.1.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_openai.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from arena.policies.openai import OpenAIPolicy
from arena.policies.types import PolicyError, SamplingParams


class Stub(BaseHTTPRequestHandler):
    """Answers like vLLM's server; records what it was sent."""

    seen: list[tuple[str, dict[str, Any], str | None]] = []
    answer: bytes | None = None  # set: the raw body of every answer (a broken endpoint)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.seen.append((self.path, body, self.headers.get("Authorization")))
        if Stub.answer is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(Stub.answer)))
            self.end_headers()
            self.wfile.write(Stub.answer)
        elif body.get("model") == "missing":
            self._send(404, {"error": {"message": "model 'missing' not found"}})
        elif self.path.endswith("/chat/completions"):
            entries = [
                {"token": "token_id:42", "logprob": -0.25},
                {"token": "token_id:7", "logprob": -1.5},
            ]
            self._send(
                200,
                {
                    "choices": [
                        {
                            "message": {"role": "assistant", "content": "Hi!"},
                            "logprobs": {"content": entries},
                            "finish_reason": "stop",
                        }
                    ]
                },
            )
        else:
            self._send(
                200,
                {
                    "choices": [
                        {
                            "text": " go",
                            "finish_reason": "length",
                            "logprobs": {"tokens": [" go"], "token_logprobs": [-0.5]},
                        }
                    ]
                },
            )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Stub.seen = []
    Stub.answer = None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_chat_and_token_prompts(server: str, tiny_tokenizer) -> None:
    policy = OpenAIPolicy(server, "smol", api_key="k", tokenizer=tiny_tokenizer)
    chat, ids = policy.generate(
        [[{"role": "user", "content": "hello"}], np.array([1, 2, 3])],
        SamplingParams(temperature=0.5, max_new_tokens=7, stop=["\n"], seed=9),
    )
    assert chat.text == "Hi!" and chat.token_ids.tolist() == [42, 7] and chat.extra["exact_ids"]
    np.testing.assert_allclose(chat.logprobs, [-0.25, -1.5])
    assert ids.finish_reason == "length" and ids.prompt_ids.tolist() == [1, 2, 3]
    assert ids.token_ids.tolist() == tiny_tokenizer.encode(" go", add_special_tokens=False)
    bodies = {path: (body, auth) for path, body, auth in Stub.seen}
    chat_body, auth = bodies["/v1/chat/completions"]
    assert auth == "Bearer k" and chat_body["max_tokens"] == 7 and chat_body["stop"] == ["\n"]
    assert chat_body["seed"] == 9 and chat_body["logprobs"] is True
    assert bodies["/v1/completions"][0]["prompt"] == [1, 2, 3]


def test_http_and_network_errors_are_clear(server: str) -> None:
    with pytest.raises(PolicyError, match="HTTP 404.*not found") as info:
        OpenAIPolicy(server, "missing").generate([[{"role": "user", "content": "x"}]])
    assert info.value.code == "bad_request"
    with pytest.raises(PolicyError, match="cannot reach") as info:
        OpenAIPolicy("http://127.0.0.1:9/v1", "m", timeout=2).generate([[1, 2]])
    assert info.value.code == "unreachable"


CHAT = [{"role": "user", "content": "x"}]


MALFORMED = [  # (the endpoint's whole answer, the prompt, what the error says)
    (b'{"choices": [{"mess', CHAT, "chat/completions did not answer JSON"),
    (b'{"choices": []}', CHAT, "chat/completions answered without choices"),
    (b'{"choices": [{"message": "hi"}]}', CHAT, "'message' must be an object, not \"hi\""),
    (b'{"choices": [{"message": {"content": 5}}]}', CHAT, "'content' must be a string, not 5"),
    (
        b'{"choices": [{"message": {"content": "a"}, "logprobs": {"content": ["a"]}}]}',
        CHAT,
        "'content' must be an object",
    ),
    (
        b'{"choices": [{"message": {"content": "a"},'
        b' "logprobs": {"content": [{"token": "a", "logprob": "abc"}]}}]}',
        CHAT,
        "'logprob' must be a number, not \"abc\"",
    ),
    (
        b'{"choices": [{"message": {"content": "a"},'
        b' "logprobs": {"content": [{"token": "token_id:zz", "logprob": -1}]}}]}',
        CHAT,
        "'token' must be 'token_id:' and a number",
    ),
    (b'{"choices": [{"text": ["a"]}]}', [1, 2], "'text' must be a string"),
    (
        b'{"choices": [{"text": "a", "logprobs": {"token_logprobs": "ab"}}]}',
        [1, 2],
        "'token_logprobs' must be a list",
    ),
]


def test_an_endpoints_malformed_answer_is_a_policy_error_naming_the_field(server: str) -> None:
    # Invalid model output from an endpoint fails that request alone, with code `malformed`
    # (a bus error the caller reads), never an AttributeError or a reply whose text is no str.
    for answer, prompt, message in MALFORMED:
        Stub.answer = answer
        with pytest.raises(PolicyError) as info:
            OpenAIPolicy(server, "m").generate([prompt])
        assert message in str(info.value) and info.value.code == "malformed", answer


def test_built_from_a_config_it_counts_a_reply_without_ids_with_its_tokenizer(
    server: str, tiny_tokenizer
) -> None:
    from arena.policies.factory import make_policy

    config = {"backend": "openai", "base_url": server, "model": "smol", "tokenizer": "tiny"}
    policy = make_policy(config)
    (reply,) = policy.generate([np.array([1, 2, 3])])  # the stub answers " go" with no ids
    assert reply.token_ids.tolist() == tiny_tokenizer.encode(" go", add_special_tokens=False)
