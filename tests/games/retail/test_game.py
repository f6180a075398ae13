"""games/retail/game.py: the support game played by the scripted user and the scripted agent,
rewards worked out by hand on fixed transcripts, tool errors, the turn limit, who sees what,
and the conformance kit.

Run with `.venv/bin/python -m pytest -q tests/games/retail/test_game.py`.
"""

from __future__ import annotations

import asyncio
import json

import pytest

import games.conformance as conformance
from arena.play.episode import play_episode
from arena.play.seats import BotSeat, SimulatorSeat
from games.bots.retail import RetailAgentBot, intent
from games.conformance import check_game
from games.retail.game import RetailSupport
from games.retail.tasks import KINDS
from games.tools import call_json
from simulators.base import SimulatorView
from simulators.scripted_user import ScriptedUser

# seed 11 with kinds=["cancel"]: Ethan Kowalski cancels #W5057437 (one board game, $31.25)
# because he ordered it by mistake
EMAIL, ORDER, REFUND = "ethan.kowalski37@example.com", "#W5057437", "$31.25"


def msg(text: str) -> str:
    return f"<message>{text}</message>"


def user_view(env: RetailSupport, turn: int) -> SimulatorView:
    return SimulatorView(
        game="retail-v0",
        seat="user",
        rules=env.rules("user"),
        observation=env.observe("user")["text"],
        history=tuple(env.visible_posts("user")),
        context=env.simulator_context("user"),
        turn=turn,
    )


def play_scripted(env: RetailSupport, seed: int) -> None:
    """The scripted user against the scripted agent, the user checked for leaks every turn."""
    env.reset(seed=seed)
    user, agent, turns = ScriptedUser(), RetailAgentBot(seed), 0
    while not env.is_over:
        seat = env.agent_selection
        text = env.observe(seat)["text"]
        assert env.interaction.leaks(seat, text, env.posts) == []
        if seat == "user":
            env.step_text(asyncio.run(user.respond(user_view(env, turns))))
            turns += 1
        else:
            env.step(agent.act(env, seat))


def cancel_game(**kwargs: object) -> RetailSupport:
    env = RetailSupport(kinds=["cancel"], **kwargs)
    env.reset(seed=11)
    assert env.task.actions[1] == call_json(
        "cancel_order", order_id=ORDER, reason="ordered by mistake"
    )
    assert env.task.outputs == (REFUND,)
    return env


def play_texts(env: RetailSupport, texts: list[str]) -> None:
    for text in texts:
        assert not env.is_over
        env.step_text(text)


@pytest.mark.parametrize("kind", KINDS)
def test_the_scripted_user_and_agent_succeed(kind: str) -> None:
    env = RetailSupport(kinds=[kind])
    for seed in range(4):
        play_scripted(env, seed)
        assert env.termination_reason == "user_stop"
        assert env.returns == {"user": 0.0, "agent": 1.0}
        info = env.infos["agent"]
        assert (info["success"], info["db_match"], info["outputs_ok"]) == (True, True, True)
        assert info["metrics"]["success"] == 1.0
        assert info["metrics"]["tool_errors"] == 0.0
        assert env.db.state_hash() == env.expected
        for output in env.task.outputs:
            assert any(output in m for m in env.agent_messages())


def test_a_correct_transcript_by_hand_earns_1() -> None:
    env = cancel_game()
    assert env.agent_selection == "user"
    play_texts(
        env,
        [
            "Hi, I want to cancel an order.",
            msg("Sure. What is your email and the order id?"),
            f"It's {EMAIL}, order {ORDER}. I ordered it by mistake.",
            call_json("find_user", email=EMAIL),
        ],
    )
    assert env.agent_selection == "agent"  # a tool call: the agent moves again
    assert env.posts[-1].sender == "tools"
    assert env.posts[-1].text.startswith("Found user U2676: Ethan Kowalski")
    play_texts(
        env,
        [
            call_json("cancel_order", order_id=ORDER, reason="ordered by mistake"),
            msg(f"Your order is cancelled; {REFUND} will be refunded."),
        ],
    )
    assert env.agent_selection == "user" and not env.is_over
    env.step_text("Great, thanks! ###STOP### (the model kept talking)")
    assert env.posts[-1].text == "Great, thanks! ###STOP###"
    assert env.termination_reason == "user_stop"
    assert env.returns == {"user": 0.0, "agent": 1.0}
    assert env.infos["user"]["metrics"] == {
        "success": 1.0,
        "db_match": 1.0,
        "outputs_ok": 1.0,
        "tool_calls": 2.0,
        "tool_errors": 0.0,
    }


@pytest.mark.parametrize(
    ("change", "said", "db_match", "outputs_ok"),
    [
        # the wrong reason is stored with the cancellation
        (
            [call_json("cancel_order", order_id=ORDER, reason="no longer needed")],
            f"Cancelled, refund {REFUND}.",
            False,
            True,
        ),
        # nothing done, though the agent says it was
        ([], f"Cancelled, refund {REFUND}.", False, True),
        # right change, but the refund is never stated
        (
            [call_json("cancel_order", order_id=ORDER, reason="ordered by mistake")],
            "Done.",
            True,
            False,
        ),
        # right change and words, plus a change nobody asked for
        (
            [
                call_json("cancel_order", order_id=ORDER, reason="ordered by mistake"),
                call_json(
                    "change_user_address", user_id="U2676", address="1 Elm Drive, Boise, ID 83701"
                ),
            ],
            f"Cancelled, refund {REFUND}.",
            False,
            True,
        ),
    ],
)
def test_wrong_or_missing_work_earns_0(
    change: list[str], said: str, db_match: bool, outputs_ok: bool
) -> None:
    env = cancel_game()
    play_texts(env, ["Cancel please.", call_json("find_user", email=EMAIL), *change, msg(said)])
    env.step_text("###STOP###")
    assert env.returns == {"user": 0.0, "agent": 0.0}
    info = env.infos["agent"]
    assert (info["success"], info["db_match"], info["outputs_ok"]) == (False, db_match, outputs_ok)


def test_the_refund_counts_only_in_messages_to_the_user() -> None:
    env = cancel_game()
    # the refund appears in the tool's output, which the user never sees
    play_texts(
        env,
        [
            "Cancel please.",
            call_json("find_user", email=EMAIL),
            call_json("cancel_order", order_id=ORDER, reason="ordered by mistake"),
        ],
    )
    assert REFUND in env.posts[-1].text
    play_texts(env, [msg("All done."), "###STOP###"])
    assert env.infos["agent"]["outputs_ok"] is False
    assert env.returns["agent"] == 0.0


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            call_json("refund_everything", order_id=ORDER),
            "unknown tool 'refund_everything'. The tools are find_user, get_user, list_orders, "
            "get_order, cancel_order, return_items, change_order_address, change_user_address",
        ),
        (
            '{"name": "get_order", "arguments": {"order_id": ',
            "the tool call is not valid JSON (Expecting value: line 1 column 48 (char 47)); "
            'write {"name": TOOL, "arguments": {...}}',
        ),
        (
            call_json("get_order", order_id=5057437),
            "get_order: argument 'order_id' must be str, got number 5057437",
        ),
        (
            call_json("return_items", order_id=ORDER, item_ids="I9148"),
            "return_items: argument 'item_ids' must be list[str], got string \"I9148\"",
        ),
        (
            call_json("cancel_order", order_id=ORDER, reason="no longer needed"),
            "identify the customer with find_user first",
        ),
    ],
)
def test_a_bad_tool_call_is_a_tool_error_not_a_forfeit(text: str, error: str) -> None:
    env = cancel_game()
    play_texts(env, ["Cancel please.", text])
    info = env.infos["agent"]
    assert info["tool_error"] == error
    assert (info["invalid"], info["invalid_count"], info["forfeit"]) == (False, 0, False)
    assert env.agent_selection == "agent" and not env.is_over
    assert [(p.sender, p.field) for p in env.posts[-2:]] == [
        ("agent", "tool_call"),
        ("tools", "tool_result"),
    ]
    assert env.posts[-1].text == f"Error: {error}"
    assert f"Error: {error}" in env.observe("agent")["text"]
    assert "Error:" not in env.observe("user")["text"]
    # the record is of the turn: a good call next clears it
    env.step_text(call_json("find_user", email=EMAIL))
    assert "tool_error" not in env.infos["agent"]
    assert env.tool_errors == 1 and env.tool_calls == 2


def test_the_agent_must_write_a_call_or_a_message() -> None:
    env = cancel_game()
    env.step_text("Cancel please.")
    env.step_text("Sure, one moment.")  # neither a <message> nor a JSON call
    info = env.infos["agent"]
    assert info["invalid"] and info["retries"] == 1 and not env.is_over
    assert "could not read 'Sure, one moment.' as an action" in info["invalid_reason"]
    env.step_text(msg("Sure, one moment."))
    assert not env.infos["agent"]["invalid"] and env.agent_selection == "user"


def test_parse_action_per_seat() -> None:
    env = cancel_game()
    call = call_json("get_order", order_id=ORDER)
    assert env.parse_action("agent", f"  <tool_call>{call}</tool_call> ") == call
    assert env.parse_action("agent", '{"NAME": "Get_Order", "arguments": {"Order_ID": "#W1"}}') == (
        call_json("get_order", order_id="#W1")
    )
    assert env.parse_action("agent", "{not json") == "{not json"  # a call attempt: a tool error
    assert env.parse_action("agent", "<MESSAGE> Hello </message>") == "<message>Hello</message>"
    for junk in ("", "  ", "hello", "<message></message>", "<tool_call>{}", None):
        assert env.parse_action("agent", junk) is None
    assert env.parse_action("user", "  Hi there  ") == "Hi there"
    assert env.parse_action("user", "Bye ###STOP### bye") == "Bye ###STOP###"
    for junk in ("", "  ", "???", "\x01"):
        assert env.parse_action("user", junk) is None


def test_a_user_that_never_stops_is_cut_at_max_turns() -> None:
    env = cancel_game(max_turns=6)
    for _ in range(3):
        play_texts(env, ["Hello? Is anyone there?", msg("How can I help you?")])
    assert env.is_over and env.termination_reason == "max_turns"
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env.returns == {"user": 0.0, "agent": 0.0}
    assert env.infos["agent"]["db_match"] is False
    assert env.infos["agent"]["termination_reason"] == "max_turns"


def test_the_db_counts_even_when_the_turn_limit_ends_the_talk() -> None:
    env = cancel_game(max_turns=4)
    play_texts(
        env,
        [
            "Cancel please.",
            call_json("find_user", email=EMAIL),
            call_json("cancel_order", order_id=ORDER, reason="ordered by mistake"),
            msg(f"Cancelled; {REFUND} refunded."),
        ],
    )
    assert env.termination_reason == "max_turns"
    assert env.returns["agent"] == 1.0


def test_who_sees_what() -> None:
    env = cancel_game()
    graph = env.interaction.graph
    assert env.seat_role("user") == "simulated-user-v0" and env.simulatable("user")
    assert env.seat_role("agent") == "executor-v0" and not env.simulatable("agent")
    assert env.role_kwargs("agent") == {"allow_message": True}
    assert set(graph.nodes["user"]["never_sees"]) == {"tool_call", "tool_result"}
    assert graph.nodes["tools"].get("role") is None
    play_texts(env, ["Cancel please.", call_json("find_user", email=EMAIL), msg("Which order?")])
    user_text, agent_text = env.observe("user")["text"], env.observe("agent")["text"]
    assert "find_user" not in user_text and "Found user" not in user_text
    assert "Found user U2676" in agent_text
    # the hidden goal and persona reach the user seat, never the agent
    for secret in (env.task.goal, env.task.persona, "The order id is"):
        assert secret in user_text and secret not in agent_text
    assert env.private_info("user") == [env.task.goal, env.task.persona]
    assert "Tools:\n- find_user(email?: str, name?: str)" in env.rules("agent")
    assert "Tools:" not in env.rules("user")


def test_simulator_context_holds_the_users_script() -> None:
    env = cancel_game()
    context = env.simulator_context("user")
    assert context["goal"] == env.task.goal and context["persona"] == env.task.persona
    assert context["request"] == "Hello, I need to cancel one of my orders."
    assert context["facts"] == [
        "My name is Ethan Kowalski.",
        f"My email is {EMAIL}.",
        f"The order id is {ORDER}.",
        "I ordered it by mistake.",
    ]
    assert context["fact_keywords"][3] == ["reason", "why"]
    assert context["done_markers"] == ["cancelled"] and context["stop"] == "###STOP###"
    assert json.dumps(context)  # plain data a simulator can hold
    assert env.simulator_context("agent") == {}


def test_a_forfeit_still_reports_the_outcome() -> None:
    env = cancel_game(max_retries=0)
    env.step_text("Cancel please.")
    env.step_text("no format at all")
    assert env.termination_reason == "illegal" and env.infos["agent"]["forfeit"]
    assert env.infos["agent"]["success"] is False and "metrics" in env.infos["agent"]


def test_the_bot_plays_only_the_agent_seat() -> None:
    env = cancel_game()
    with pytest.raises(TypeError, match="cannot play retail_v0"):
        RetailAgentBot(0).act(env, "user")


def test_conformance_kit() -> None:
    """Every check passes; the user seat speaks freely, so the kit refuses only empty and blank
    text there (games.conformance.PLAIN_TEXT_ROLES)."""
    report = check_game(RetailSupport)
    assert report.passed, report.table()
    assert conformance.junk_for(RetailSupport(), "user") == ("", "   ")
    assert conformance.junk_for(RetailSupport(), "agent") == conformance.JUNK


def test_the_episode_runner_plays_it_with_a_simulator_and_the_bot() -> None:
    """Through arena.play: the runner's leak check on every prompt, the simulator's turns."""
    env = RetailSupport(kinds=["return"])
    seats = {
        "user": SimulatorSeat(ScriptedUser(), "scripted-user-v0"),
        "agent": BotSeat(RetailAgentBot(), "retail-agent-v0"),
    }
    episode = asyncio.run(play_episode(env, "retail-v0", seats, seed=5, episode_id="e5"))
    assert episode.termination == "user_stop"
    assert episode.final_rewards == {"user": 0.0, "agent": 1.0}
    assert episode.turns[0].role == "simulated_user"
    assert episode.turns[0].text == env.task.request
    assert episode.turns[-1].text.endswith("###STOP###")


@pytest.mark.parametrize(
    ("request_text", "kind"),
    [
        ("Hi, I'd like to cancel an order.", "cancel"),
        ("Hello, I'd like to make a return.", "return"),
        ("Hello, one of my orders should go to a different address.", "order_address"),
        ("Hi, I moved and need to update the address on my account.", "user_address"),
        ("Hi, how much did I pay for one of my orders?", "order_total"),
        ("Hello!", None),
    ],
)
def test_the_bot_reads_the_kind_of_request(request_text: str, kind: str | None) -> None:
    assert intent(request_text) == kind


def test_the_bot_reports_a_refusal_once_and_does_not_retry() -> None:
    env = cancel_game()
    delivered = next(
        o.order_id
        for o in env.db.orders.values()
        if o.user_id == "U2676" and o.status == "delivered"
    )
    bot = RetailAgentBot(0)
    env.step_text("I want to cancel an order.")
    assert env.parse_action("agent", bot.act(env, "agent")).startswith("<message>Could you")
    env.step(bot.act(env, "agent"))
    env.step_text(f"My email is {EMAIL}. The order id is {delivered}. I no longer need it.")
    for name in ("find_user", "get_order", "cancel_order"):
        env.step(bot.act(env, "agent"))
        assert env.posts[-2].text.endswith(f'"name": "{name}"}}')
    assert env.infos["agent"]["tool_error"].endswith("only pending orders can be cancelled")
    env.step(bot.act(env, "agent"))
    assert env.posts[-1].text == (
        f"Sorry, I could not do that: order {delivered} is delivered; only pending orders can "
        "be cancelled"
    )
    env.step_text("Oh. Please try again.")
    env.step(bot.act(env, "agent"))
    assert env.posts[-1].text == "Is there anything else I can help you with?"
