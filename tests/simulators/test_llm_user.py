"""simulators/llm_user.py: the prompt, the conversation it continues, the leak guard, the turn
limit, and a real model behind it.

The guard and limit tests drive it with a scripted ``generate``; the last test binds the real
tiny SmolLM2-tokenizer Llama through the same ``generator`` the runner uses.

Run with `.venv/bin/python -m pytest -q tests/simulators/test_llm_user.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from arena.play.seating import generator
from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.policies.types import SamplingParams
from games.interaction import Post
from simulators.base import SimulatorView
from simulators.llm_user import FALLBACK, STOP, LLMUser, clean, leaks_goal

CONTEXT = {
    "goal": "cancel order W7 because it arrived too late for the party",
    "persona": "terse and a little grumpy",
    "facts": {"name": "Ana Ruiz", "order": "W7"},
}


def view(history: Sequence[Post] = (), turn: int = 0) -> SimulatorView:
    return SimulatorView(
        game="retail-v0",
        seat="user",
        rules="",
        observation="",
        history=tuple(history),
        context=CONTEXT,
        turn=turn,
    )


def scripted(*replies: str):
    calls: list[list[dict[str, str]]] = []

    async def generate(messages: list[dict[str, str]]) -> str:
        calls.append(messages)
        return replies[len(calls) - 1]

    return generate, calls


def test_the_prompt_states_persona_goal_facts_and_the_stop_token() -> None:
    assert LLMUser().system_prompt(CONTEXT) == (
        "You are a customer talking to a support agent. Stay in character.\n"
        "Persona: terse and a little grumpy\n"
        "Your goal (keep it to yourself; say it in your own words): cancel order W7 because it "
        "arrived too late for the party\n"
        "What you know, to tell only when asked: name: Ana Ruiz; order: W7\n"
        "Write one short message per turn. Reveal details one at a time, when asked. When your "
        "goal is met, end your message with ###STOP###."
    )
    assert "Persona: cheerful" in LLMUser(persona="cheerful").system_prompt(CONTEXT)


def test_the_conversation_puts_the_agent_on_the_other_side() -> None:
    history = [
        Post("user", "message", "I want to cancel something."),
        Post("agent", "message", "Sure. Which order?"),
        Post("agent", "tool_result", "never shown"),
    ]
    messages = LLMUser().messages(view(history))
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("assistant", "I want to cancel something."),
        ("user", "Sure. Which order?"),
    ]
    opening = LLMUser().messages(view())
    assert [m["role"] for m in opening] == ["system", "user"]


def test_the_guard_regenerates_a_reply_that_quotes_the_goal() -> None:
    user = LLMUser(retries=1)
    generate, calls = scripted(
        "Hi. I want to cancel order W7 because it arrived too late for the party.",
        "Hi, I need to cancel an order.",
    )
    user.bind(generate)
    assert asyncio.run(user.respond(view())) == "Hi, I need to cancel an order."
    assert user.leaks == 1 and len(calls) == 2
    assert calls[1][-1]["content"].startswith("Say it again in your own words")
    stubborn = LLMUser(retries=1)
    stubborn.bind(scripted(*["cancel order W7 because it arrived too late"] * 2)[0])
    assert asyncio.run(stubborn.respond(view())) == FALLBACK and stubborn.leaks == 2


def test_leak_detection_and_cleaning() -> None:
    goal = CONTEXT["goal"]
    assert leaks_goal("CANCEL ORDER W7, because it ARRIVED!", goal, window=6)
    assert not leaks_goal("cancel order W7 please", goal, window=6)
    assert leaks_goal("cancel order W7 please", goal, window=3)
    assert not leaks_goal("anything", "", window=3)
    assert clean("User: Thanks! ###STOP### and more text") == "Thanks! ###STOP###"
    assert clean("x" * 900) == "x" * 600


def test_the_turn_limit_ends_with_the_stop_token() -> None:
    user = LLMUser(max_turns=2)
    generate, calls = scripted("unused")
    user.bind(generate)
    assert asyncio.run(user.respond(view(turn=2))) == STOP and calls == []
    with pytest.raises(RuntimeError, match="needs a model"):
        asyncio.run(LLMUser().respond(view()))
    with pytest.raises(ValueError):
        LLMUser(max_turns=0)


def test_it_talks_through_a_real_model(tiny_model) -> None:
    model, tokenizer = tiny_model
    chat = ChatFormat(tokenizer)
    user = LLMUser()
    user.bind(generator(HFPolicy(model, tokenizer), chat, SamplingParams(max_new_tokens=12)))
    reply = asyncio.run(user.respond(view([Post("agent", "message", "Hello! How can I help?")])))
    assert isinstance(reply, str) and len(reply) <= 600
