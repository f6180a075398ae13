"""simulators/scripted_user.py: the deterministic customer, driven by hand-written
conversations (context and history only), then by the retail game's own context.

Run with `.venv/bin/python -m pytest -q tests/simulators/test_scripted_user.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from games.interaction import Post
from games.retail.game import RetailSupport
from simulators.base import Simulator, SimulatorView
from simulators.scripted_user import GIVE_UP, NUDGE, THANKS, ScriptedUser, reply

CONTEXT = {
    "request": "Hi, I'd like to cancel an order.",
    "facts": [
        "My email is ana@example.com.",
        "The order id is #W7.",
        "The new address is 1 Oak Street, Austin, TX 73301.",
    ],
    "fact_keywords": [["email"], ["order"], ["address"]],
    "done_markers": ["cancelled"],
}
EMAIL, ORDER, ADDRESS = CONTEXT["facts"]


def user(text: str) -> Post:
    return Post("user", "message", text)


def agent(text: str) -> Post:
    return Post("agent", "message", text)


def respond(history: Sequence[Post], context: dict = CONTEXT, max_idle: int = 3) -> str:
    view = SimulatorView("retail-v0", "user", "", "", tuple(history), context, turn=0)
    return asyncio.run(ScriptedUser(max_idle=max_idle).respond(view))


def test_it_opens_with_the_request() -> None:
    assert respond([]) == "Hi, I'd like to cancel an order."


def test_it_tells_what_it_is_asked_for() -> None:
    opened = [user(CONTEXT["request"])]
    assert respond([*opened, agent("What is your EMAIL?")]) == EMAIL
    assert respond([*opened, agent("Your e-mail and the order id, please.")]) == f"{EMAIL} {ORDER}"
    # "email address" asks for the email only, not the address
    assert respond([*opened, agent("What is your email address?")]) == EMAIL
    assert respond([*opened, agent("And the new shipping address?")]) == ADDRESS


def test_it_reads_only_the_agents_last_message() -> None:
    history = [user(CONTEXT["request"]), agent("Your email?"), user(EMAIL), agent("Thanks.")]
    assert respond(history) == NUDGE


def test_it_stops_once_told_the_request_is_done() -> None:
    history = [user(CONTEXT["request"]), agent("Order #W7 is now CANCELLED.")]
    assert respond(history) == f"{THANKS} ###STOP###"
    assert respond(history, {**CONTEXT, "stop": "<END>"}) == f"{THANKS} <END>"


def test_it_gives_up_after_max_idle_replies_without_progress() -> None:
    history = [user(CONTEXT["request"]), agent("Your email?"), user(EMAIL)]
    history += [agent("Hmm."), user(NUDGE)] * 2
    # two idle replies so far: with max_idle=2 it gives up; with 3 it nudges once more
    assert respond([*history, agent("Hmm.")], max_idle=2) == f"{GIVE_UP} ###STOP###"
    assert respond([*history, agent("Hmm.")], max_idle=3) == NUDGE
    # a repeated fact is no progress either, but a new one is told even when idle is spent
    assert respond([*history, agent("Your email again?")], max_idle=2) == f"{GIVE_UP} ###STOP###"
    assert respond([*history, agent("Which order?")], max_idle=2) == ORDER


def test_it_repeats_a_fact_when_asked_again() -> None:
    history = [user(CONTEXT["request"]), agent("Your email?"), user(EMAIL)]
    assert respond([*history, agent("Sorry, your email again?")]) == EMAIL


def test_it_keeps_no_state_and_checks_its_context() -> None:
    sim = ScriptedUser()
    assert isinstance(sim, Simulator) and not sim.needs_model
    assert sim.role == "simulated_user"
    history = [user(CONTEXT["request"]), agent("Your order?")]
    assert reply(CONTEXT, history, "user") == reply(CONTEXT, history, "user") == ORDER
    with pytest.raises(ValueError, match="3 facts but 1 keyword lists"):
        reply({**CONTEXT, "fact_keywords": [["email"]]}, history, "user")
    with pytest.raises(ValueError, match="max_idle must be >= 1"):
        ScriptedUser(max_idle=0)


def test_it_plays_the_retail_game_from_its_context() -> None:
    env = RetailSupport(kinds=["order_address"])
    env.reset(seed=2)
    context = env.simulator_context("user")
    sim = ScriptedUser()
    view = SimulatorView("retail-v0", "user", "", "", (), context, 0)
    assert asyncio.run(sim.respond(view)) == env.task.request
    env.step_text(env.task.request)
    env.step_text("<message>Sure: your email, the order id and the new address?</message>")
    view = SimulatorView("retail-v0", "user", "", "", tuple(env.visible_posts("user")), context, 1)
    facts = {f.key: f.text for f in env.task.facts}
    assert asyncio.run(sim.respond(view)) == " ".join(
        [facts["email"], facts["order"], facts["address"]]
    )
