"""The scripted adapter: bots with act(env, agent), plain callables, and text responders.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_scripted.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.policies.factory import make_policy
from arena.policies.scripted import ScriptedPolicy
from arena.policies.types import InvalidRequest


class FakeEnv:
    """Stands in for a game env: only the text layer the adapter touches."""

    def action_to_text(self, agent: str, action: int) -> str:
        return f"<answer>{action}</answer>"


class FirstLegalBot:
    def act(self, env: FakeEnv, agent: str) -> np.int64:
        return np.int64(3)


def test_bot_with_act_and_plain_callable() -> None:
    for bot in (FirstLegalBot(), lambda env, agent: 3):
        policy = ScriptedPolicy(bot)
        assert policy.act(FakeEnv(), "player_0") == 3
        gen = policy.generate_for(FakeEnv(), "player_0")
        assert gen.text == "<answer>3</answer>" and gen.extra == {"action": 3}
        assert type(gen.extra["action"]) is int and gen.version == 0 and len(gen.token_ids) == 0
    with pytest.raises(InvalidRequest, match="generate_for"):
        ScriptedPolicy(FirstLegalBot()).generate([[{"role": "user", "content": "hi"}]])


def test_text_responder_with_token_accounting(tiny_tokenizer) -> None:
    policy = ScriptedPolicy(
        respond=lambda messages: f"echo {messages[-1]['content']}", tokenizer=tiny_tokenizer
    )
    gen = policy.generate([[{"role": "user", "content": "hi"}]])[0]
    assert gen.text == "echo hi" and tiny_tokenizer.decode(gen.token_ids.tolist()) == "echo hi"
    assert np.all(gen.logprobs == 0)
    with pytest.raises(InvalidRequest, match="no act"):
        policy.act(FakeEnv(), "p")
    with pytest.raises(InvalidRequest, match="needs chat messages"):
        policy.generate([[1, 2, 3]])


def test_scripted_from_config_and_bad_bots() -> None:
    policy = make_policy({"backend": "scripted", "bot": f"{__name__}:FirstLegalBot"})
    assert policy.act(FakeEnv(), "p") == 3
    with pytest.raises(TypeError, match="act"):
        ScriptedPolicy(object())
    with pytest.raises(ValueError, match="needs a bot"):
        ScriptedPolicy()
