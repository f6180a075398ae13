"""Run: .venv/bin/python -m pytest -q tests/arena/tournament/test_human.py

The terminal loop of ``arena play``, driven by scripted lines instead of a person: bad moves are
explained and asked again without ever reaching the game, minimax is never beaten, ``quit`` and
the end of input resign cleanly, and a model opponent's raw reply is shown.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

import games
import games.bots
from arena.core.errors import ConfigError
from arena.play.config import GameConfig, PlayConfig
from arena.play.seats import BotSeat
from arena.tournament.human import PROMPT, HumanResult, pick_seat, play_human
from games.text_env import TextGame

CELLS = [str(cell) for cell in range(1, 10)]


class Terminal:
    """Scripted input lines and the captured output; at the end of the lines, end of input."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []
        self.out: list[str] = []

    def read_line(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.lines:
            raise EOFError
        line = self.lines.pop(0)
        self.out.append(prompt + line)
        return line

    def write(self, text: str) -> None:
        self.out.append(text)

    @property
    def text(self) -> str:
        return "\n".join(self.out)


def play(
    opponent: str, lines: Iterable[str], *, human: str = "player_0", seed: int = 0
) -> tuple[HumanResult, Terminal, TextGame]:
    env = games.make("tictactoe-v0")
    other = next(a for a in env.possible_agents if a != human)
    terminal = Terminal(lines)
    seats = {other: BotSeat(games.bots.make(opponent, seed=seed), opponent)}
    result = play_human(
        env, human, seats, seed=seed, read_line=terminal.read_line, write=terminal.write
    )
    return result, terminal, env


def test_bad_moves_are_explained_and_asked_again() -> None:
    # 1 is taken by the person's own first move, so the second "1" names an occupied square.
    result, terminal, env = play("random-v0", ["1", "abc", "10", "1", *CELLS * 2])
    text = terminal.text
    assert "not a legal move: cannot read 'abc' as a move; legal moves: " in text
    assert "not a legal move: cannot read '10' as a move" in text
    assert "not a legal move: '1' cannot be played now; legal moves: " in text
    # The explanation lists the moves that are legal, and the game went on to its end.
    explained = next(line for line in terminal.out if "'1' cannot be played now" in line)
    assert " 1," not in explained.split("legal moves:")[1]
    assert result.outcome in ("win", "draw", "loss")
    assert result.termination_reason in ("win", "draw")
    assert "result: " in terminal.out[-1]
    # No rejected text ever reached the game (where it would count towards a forfeit).
    assert env.infos["player_0"]["invalid_count"] == 0
    assert set(terminal.prompts) == {PROMPT}


@pytest.mark.parametrize("human", ["player_0", "player_1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_minimax_is_never_beaten(human: str, seed: int) -> None:
    # The fixed sequence tries every cell in order; the taken ones are refused and skipped.
    result, terminal, _ = play("minimax-v0", CELLS * 2, human=human, seed=seed)
    assert result.outcome in ("draw", "loss")
    assert result.returns[human] <= 0
    assert terminal.out[-1].startswith(("result: a draw", "result: you lose"))
    assert "minimax-v0 (player_" in terminal.text


def test_the_board_and_legal_moves_come_before_each_move() -> None:
    _, terminal, _ = play("minimax-v0", ["5", *CELLS])
    first_prompt = next(i for i, line in enumerate(terminal.out) if line.startswith(PROMPT))
    before = "\n".join(terminal.out[:first_prompt])
    assert "Rules:" in before  # the rules, once
    assert "1 | 2 | 3" in before
    assert "legal moves: 1, 2, 3, 4, 5, 6, 7, 8, 9" in before
    assert terminal.text.count("Rules:") == 1
    assert "Game over" in terminal.text  # the final board


@pytest.mark.parametrize("lines", [["quit"], ["5", "resign"], []], ids=["quit", "resign", "eof"])
def test_quit_and_end_of_input_resign(lines: list[str]) -> None:
    result, terminal, env = play("random-v0", lines)
    assert result.outcome == "resigned"
    assert "you resigned; bye" in terminal.text
    assert not env.is_over


def test_rules_can_be_shown_again() -> None:
    _, terminal, _ = play("random-v0", ["rules", "quit"])
    assert terminal.text.count("Rules:") == 2


def test_pick_seat() -> None:
    agents = ["player_0", "player_1"]
    rng = random.Random(0)
    assert pick_seat("first", agents, rng) == "player_0"
    assert pick_seat("second", agents, rng) == "player_1"
    assert pick_seat("1", agents, rng) == "player_1"
    assert pick_seat("player_0", agents, rng) == "player_0"
    assert pick_seat("random", agents, rng) in agents
    for bad in ("third", "2", "-1"):
        with pytest.raises(ConfigError, match="--seat"):
            pick_seat(bad, agents, rng)
    with pytest.raises(ConfigError) as typo:
        pick_seat("sevond", agents, rng)
    assert str(typo.value) == (
        "--seat 'sevond': expected first, second, random, a player index 0..1 or one of "
        "['player_0', 'player_1']; did you mean 'second'?"
    )


def test_a_model_opponent_shows_its_reply() -> None:
    from arena.models import load_tokenizer
    from arena.play.seating import SeatFactory
    from arena.policies.chat import ChatFormat
    from arena.policies.config import PolicyConfig
    from arena.policies.factory import make_policy
    from arena.policies.types import SamplingParams

    policy = make_policy(PolicyConfig(backend="hf", model="tiny", dtype="float32", device="cpu"))
    factory = SeatFactory(
        PlayConfig(games=[GameConfig(id="tictactoe-v0")], policy_name="tiny"),
        policy,
        ChatFormat(load_tokenizer("tiny")),
    )
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    seat = factory.policy_seat("tictactoe-v0", trained=False, params=params)
    env = games.make("tictactoe-v0")
    terminal = Terminal(CELLS * 2)
    result = play_human(
        env,
        "player_1",
        {"player_0": seat},
        seed=0,
        read_line=terminal.read_line,
        write=terminal.write,
    )
    text = terminal.text
    assert "tiny (player_0) is thinking..." in text
    assert "model replied: " in text
    # Random weights rarely write a legal move: the game's retry rule applies to the model.
    assert "tiny's reply is not a valid move" in text or "tiny (player_0) played: " in text
    assert result.termination_reason in ("win", "draw", "illegal")
    assert "result: " in terminal.out[-1]


def test_a_choice_opponent_picks_a_legal_move_every_turn() -> None:
    """`arena play --act choice`: the model picks among the legal replies, so it never
    forfeits; the terminal generated for it regardless, and the random weights' empty replies
    forfeited the game on its first move."""
    from arena.models import load_tokenizer
    from arena.play.seating import SeatFactory
    from arena.policies.chat import ChatFormat
    from arena.policies.config import PolicyConfig
    from arena.policies.factory import make_policy
    from arena.policies.types import SamplingParams

    policy = make_policy(PolicyConfig(backend="hf", model="tiny", dtype="float32", device="cpu"))
    game = GameConfig(id="tictactoe-v0", act="choice")
    factory = SeatFactory(
        PlayConfig(games=[game], policy_name="tiny"), policy, ChatFormat(load_tokenizer("tiny"))
    )
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    seat = factory.policy_seat("tictactoe-v0", trained=False, params=params)
    env = games.make("tictactoe-v0")
    terminal = Terminal(CELLS * 2)
    result = play_human(
        env, "player_1", {"player_0": seat}, seed=0, read_line=terminal.read_line,
        write=terminal.write,
    )  # fmt: skip
    text = terminal.text
    assert "model chose: <answer>" in text and "not a valid move" not in text
    assert text.count("tiny (player_0) played: ") >= 3  # a game lasts at least 5 moves
    assert result.termination_reason in ("win", "draw")


def test_a_simulated_user_talks_to_the_person_in_the_agent_seat() -> None:
    from arena.play.seats import SimulatorSeat
    from simulators.scripted_user import ScriptedUser

    env = games.make("retail-v0")
    terminal = Terminal(["<message>Could you give me your email, please?</message>"])
    user = SimulatorSeat(ScriptedUser(), "scripted-user-v0")
    result = play_human(
        env, "agent", {"user": user}, seed=3, read_line=terminal.read_line, write=terminal.write
    )
    assert result.outcome == "resigned"  # the end of input, after one message
    text = terminal.text
    assert text.splitlines()[0] == (
        "You play agent, against simulator scripted-user-v0 (user). Type 'quit' to resign, "
        "'rules' for the rules."
    )
    wrote = [line for line in terminal.out if line.startswith("simulator scripted-user-v0")]
    # the request, then the email the person asked for (the task's own facts)
    assert len(wrote) == 2 and user.turns == 2
    assert wrote[0] == f"simulator scripted-user-v0 (user) wrote: {env.task.request}"
    assert "@" in wrote[1]


def test_a_failing_simulator_stops_the_game_saying_why() -> None:
    from arena.play.seats import SimulatorSeat
    from simulators.base import Simulator, SimulatorView

    class Mute(Simulator):  # a unit-test fake: replies with no text
        async def respond(self, view: SimulatorView) -> str:
            return None  # type: ignore[return-value]

    terminal = Terminal([])
    result = play_human(
        games.make("retail-v0"),
        "agent",
        {"user": SimulatorSeat(Mute(), "mute-v0")},
        seed=0,
        read_line=terminal.read_line,
        write=terminal.write,
    )
    assert result.outcome == "stopped"
    assert "simulator mute-v0 returned NoneType, not str; the game stops here" in terminal.out


def test_a_forfeit_in_a_role_game_costs_the_turn_and_says_so() -> None:
    """mae-v0 takes a forfeit as the seat's turn only and plays on: the terminal said the
    model "forfeits the game" while the person went on to judge."""
    from arena.models import load_tokenizer
    from arena.play.seating import SeatFactory
    from arena.policies.chat import ChatFormat
    from arena.policies.config import PolicyConfig
    from arena.policies.factory import make_policy
    from arena.policies.types import SamplingParams

    game = GameConfig(id="mae-v0", kwargs={"num_solvers": 1, "max_retries": 0})
    policy = make_policy(PolicyConfig(backend="hf", model="tiny", dtype="float32", device="cpu"))
    factory = SeatFactory(
        PlayConfig(games=[game], policy_name="tiny"), policy, ChatFormat(load_tokenizer("tiny"))
    )
    params = SamplingParams(temperature=1.0, max_new_tokens=6)
    env = games.make("mae-v0", **game.kwargs)
    seats = {
        agent: factory.policy_seat("mae-v0", trained=False, params=params, env=env, agent=agent)
        for agent in ("proposer", "solver_0")
    }
    terminal = Terminal(["1"])
    play_human(env, "judge", seats, seed=0, read_line=terminal.read_line, write=terminal.write)
    text = terminal.text
    # six random tokens are never a problem in the family's grammar: the proposer forfeits
    assert "(could not read" in text or "invalid" in text, text[-2000:]
    assert "it forfeits its turn; play goes on" in text, text[-2000:]
    assert "forfeits the game" not in text
    assert "result: " in terminal.out[-1]
