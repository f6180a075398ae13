"""Role games in the episode runner: seats in the game's roles, simulator seats, the interaction
graph enforced, and what a failing simulator does.

The game is a small dialogue defined here (a user seat that a simulator may fill, an agent seat
that holds a secret the user must never see); the policy is the scripted fake of
test_episode.py on the real SmolLM2 tokenizer.

Run with `.venv/bin/python -m pytest -q tests/arena/play/test_simulated_seats.py`.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import networkx as nx
import numpy as np
import pytest
from gymnasium import spaces

import roles
import simulators
from arena.core.errors import ConfigError
from arena.play.config import GameConfig, PlayConfig, SimulatorConfig
from arena.play.episode import play_episode
from arena.play.seating import SeatFactory
from arena.play.seats import EpisodeError, PolicySeat, SimulatorSeat
from arena.play.stats import transcript
from arena.policies.chat import ChatFormat
from arena.policies.types import SamplingParams
from games.text import CHARSET
from games.text_env import TextGame
from simulators.base import Simulator, SimulatorView
from tests.arena.play.test_episode import ScriptPolicy

SECRET = "the vault code is 7341-alpha"


class Dialogue(TextGame):
    """A user asks; the agent answers; the user says ###STOP### to end."""

    metadata = {**TextGame.metadata, "name": "dialogue_v0", "kind": "cooperative"}
    leak = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            2,
            spaces.Text(200, min_length=1, charset=CHARSET),
            spaces.Box(0, 1, (1,), np.int8),
            agents=["user", "agent"],
            max_turns=6,
            **kwargs,
        )

    def interaction_graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_node("user", role="player-v0", simulatable=True, never_sees={"secret"})
        graph.add_node("agent", role="player-v0", role_kwargs={"what": "your reply"})
        graph.add_edge("user", "agent", sees=frozenset({"message"}))
        graph.add_edge("agent", "user", sees=frozenset({"message"}))
        return graph

    def _new_game(self, rng: np.random.Generator) -> None:
        self._next = "user"
        self._stopped = False
        self._post("agent", "secret", SECRET)

    def _current_agent(self) -> str:
        return self._next

    def _legal_actions(self, agent: str) -> list[str]:
        return ["hello"]

    def _is_legal(self, agent: str, action: Any) -> bool:
        return True

    def parse_action(self, agent: str, text: str) -> str | None:
        return text.strip() or None

    def _apply(self, agent: str, action: str) -> dict[str, float]:
        self._post(agent, "message", action)
        self._stopped = "###STOP###" in action
        self._next = "agent" if agent == "user" else "user"
        return {"agent": 1.0} if self._stopped else {}

    def _outcome(self) -> str | None:
        return "user_stop" if self._stopped else None

    def _observation_array(self, agent: str) -> np.ndarray:
        return np.zeros(1, np.int8)

    def _describe(self, agent: str) -> str:
        if agent == "user" and self.leak:
            return f"Psst: {SECRET}"
        return "Your turn to talk."

    def simulator_context(self, agent: str) -> dict[str, Any]:
        return {"goal": "get a greeting"} if agent == "user" else {}


class Leaky(Dialogue):
    leak = True


class Polite(Simulator):
    """Greets, then stops; remembers what it was shown."""

    name = "polite"

    def __init__(self) -> None:
        super().__init__()
        self.views: list[SimulatorView] = []

    async def respond(self, view: SimulatorView) -> str:
        self.views.append(view)
        return "Hi, I need help." if view.turn == 0 else "Thanks! ###STOP###"


class Broken(Simulator):
    async def respond(self, view: SimulatorView) -> str:
        raise RuntimeError("persona file missing")


class Sleepy(Simulator):
    async def respond(self, view: SimulatorView) -> str:
        await asyncio.sleep(10)
        return "late"


@pytest.fixture
def chat(tiny_tokenizer) -> ChatFormat:
    return ChatFormat(tiny_tokenizer)


def agent_seat(chat: ChatFormat, texts: list[str]) -> PolicySeat:
    return PolicySeat(
        policy=ScriptPolicy(chat.tokenizer, texts),
        role=roles.make("player-v0"),
        chat=chat,
        params=SamplingParams(max_new_tokens=8),
    )


def play(env: TextGame, seats: dict) -> Any:
    return asyncio.run(play_episode(env, "dialogue-v0", seats, seed=3, episode_id="ep"))


def test_a_simulator_fills_the_user_seat_and_is_never_trained(chat: ChatFormat) -> None:
    polite = Polite()
    episode = play(
        Dialogue(),
        {
            "user": SimulatorSeat(polite, "polite-v0"),
            "agent": agent_seat(chat, ["<answer>Hello, how can I help?</answer>"]),
        },
    )
    assert episode.termination == "user_stop"
    assert [(t.seat, t.role, t.trained, t.text) for t in episode.turns] == [
        ("user", "simulated_user", False, "Hi, I need help."),
        ("agent", "player", True, "<answer>Hello, how can I help?</answer>"),
        ("user", "simulated_user", False, "Thanks! ###STOP###"),
    ]
    assert [t.reward for t in episode.turns] == [0.0, 1.0, 0.0]  # the outcome on its last turn
    assert len(episode.turns[0].response_ids) == 0 and episode.trained_turns() == [episode.turns[1]]
    assert episode.seats["user"].role == "simulated_user" and not episode.seats["user"].trained
    assert episode.seats["user"].policy == "polite-v0"
    assert episode.stats["policy_turns"] == 1
    # the transcript says which turns were trained, turn by turn
    lines = transcript(episode)["turns"]
    assert [(t["seat"], t["trained"], t["version"]) for t in lines] == [
        ("user", False, -1),
        ("agent", True, 3),  # the scripted policy's version
        ("user", False, -1),
    ]
    # The simulator saw what a policy seat would: the agent's message but never its secret.
    second = polite.views[1]
    assert second.context == {"goal": "get a greeting"} and second.turn == 1
    assert [(p.sender, p.field) for p in second.history] == [
        ("user", "message"),
        ("agent", "message"),
    ]
    assert "agent (message): Hello, how can I help?" in second.observation
    assert SECRET not in second.observation


def test_a_planted_leak_is_refused(chat: ChatFormat) -> None:
    with pytest.raises(EpisodeError, match="user may not see agent's 'secret' post") as caught:
        play(Leaky(), {"user": SimulatorSeat(Polite(), "polite-v0"), "agent": agent_seat(chat, [])})
    assert caught.value.seat == "user" and caught.value.termination == "error"


def test_a_failing_or_silent_simulator_ends_the_episode_with_an_error(chat: ChatFormat) -> None:
    with pytest.raises(EpisodeError, match="persona file missing") as caught:
        play(Dialogue(), {"user": SimulatorSeat(Broken(), "broken"), "agent": agent_seat(chat, [])})
    assert caught.value.termination == "error" and caught.value.seat == "user"
    sleepy = SimulatorSeat(Sleepy(), "sleepy", timeout=0.05)
    with pytest.raises(EpisodeError, match="gave no reply in 0.05 s"):
        play(Dialogue(), {"user": sleepy, "agent": agent_seat(chat, [])})


def factory(chat: ChatFormat, **game: Any) -> SeatFactory:
    simulators.registry.register("polite-v0", Polite, override=True)
    config = PlayConfig(games=[GameConfig("dialogue-v0", **game)])
    return SeatFactory(config, ScriptPolicy(chat.tokenizer, []), chat)


def test_seats_follow_the_games_roles_and_the_configs_simulators(chat: ChatFormat) -> None:
    f = factory(chat, simulators={"user": SimulatorConfig(id="polite-v0", timeout=5)})
    seats = f.seats("dialogue-v0", Dialogue(), random.Random(0), 0)
    assert isinstance(seats["user"], SimulatorSeat) and seats["user"].timeout == 5
    assert isinstance(seats["user"].simulator, Polite)
    agent = seats["agent"]
    assert isinstance(agent, PolicySeat) and agent.trained
    # The game's role kwargs reach the role ("what"), and the config's override them.
    assert "Reply with your reply inside" in agent.role.system_prompt("", "agent")
    f = factory(chat, role_kwargs={"what": "one word"})
    seats = f.seats("dialogue-v0", Dialogue(), random.Random(0), 0)
    assert all(isinstance(s, PolicySeat) for s in seats.values())  # no simulator: both trained
    assert "Reply with one word inside" in seats["agent"].role.system_prompt("", "agent")


def test_only_simulatable_seats_take_a_simulator(chat: ChatFormat) -> None:
    f = factory(chat, simulators={"agent": SimulatorConfig(id="polite-v0")})
    with pytest.raises(ConfigError, match=r"seat 'agent' cannot be simulated.*\['user'\]"):
        f.seats("dialogue-v0", Dialogue(), random.Random(0), 0)


def test_a_bad_tool_call_is_answered_and_recorded_on_the_turn(chat: ChatFormat) -> None:
    from games.retail import RetailSupport
    from simulators.scripted_user import ScriptedUser

    agent = PolicySeat(
        policy=ScriptPolicy(
            chat.tokenizer,
            ['<tool_call>{"name": "teleport", "arguments": {}}</tool_call>']
            + ["<message>Could you tell me more?</message>"] * 8,
        ),
        role=roles.make("executor-v0", allow_message=True),
        chat=chat,
        params=SamplingParams(max_new_tokens=8),
    )
    seats = {"user": SimulatorSeat(ScriptedUser(), "scripted-user-v0"), "agent": agent}
    episode = asyncio.run(play_episode(RetailSupport(), "retail-v0", seats, seed=2, episode_id="e"))
    first = next(t for t in episode.turns if t.seat == "agent")
    assert first.valid and "teleport" in first.error and "unknown tool" in first.error.lower()
    later = [t for t in episode.turns if t.seat == "agent"][1:]
    assert later and all(t.error == "" for t in later)
    assert episode.termination in ("user_stop", "max_turns")
    assert episode.final_rewards["agent"] == 0.0  # nothing was done
