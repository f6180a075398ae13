"""A person plays one game against bots or a model: the loop behind ``arena play``.

The loop reads and writes through two callables (``read_line`` behaves like :func:`input`:
it takes the prompt, returns a line and raises :class:`EOFError` at the end of input; ``write``
behaves like :func:`print`), so tests drive it with scripted lines and ``arena play`` with the
terminal, and it needs no curses: any terminal, a pipe or tmux works.

The person's moves are checked here, with the game's own ``parse_action`` and
``legal_actions``, before anything reaches the game: a typo is explained and asked again, and
never counts as one of the game's invalid attempts (which would end in a forfeit). The
opponents' moves go through the game exactly as in a tournament (:mod:`arena.play.episode`):
a bot's action is stepped, a model's reply is read by its role and stepped as text, so the
game's retry and forfeit rules apply to the model, and its raw reply is shown; a model that
acts by choice (``--act choice``) picks among its legal replies by their scores, as in an
episode (:func:`arena.play.choice.choose_turn`), and its pick is shown. A simulator (a
role game's simulated user) is asked as an episode asks it, its text stepped as is; one that
fails or gives no text stops the game, saying why.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arena.core.errors import ConfigError, did_you_mean
from arena.play.acting import CHOICE
from arena.play.bot_moves import BotMoves, MoveTimeout
from arena.play.choice import choose_turn
from arena.play.seats import BotSeat, Seat, SimulatorSeat, seat_seed
from arena.policies.types import ContextOverflow
from games.bots.base import legal_move
from games.text_env import TextGame
from simulators.base import SimulatorView

ReadLine = Callable[[str], str]
"""Like :func:`input`: shows the prompt, returns one line, raises :class:`EOFError` at the end."""
Write = Callable[[str], None]
"""Like :func:`print` with one argument: writes one block of text and a newline."""

PROMPT = "your move> "
QUIT_WORDS = frozenset({"quit", "exit", "resign", "q"})
RULES_WORDS = frozenset({"rules", "help", "?"})
LISTED_MOVES_MAX = 60
"""Legal moves are spelled out when there are at most this many (else the first few)."""


@dataclass(frozen=True)
class HumanResult:
    """How the game went, from the person's point of view."""

    outcome: str
    """``win``, ``draw`` or ``loss`` (compared with the best other seat); ``team`` in a
    cooperative game; ``resigned`` (quit or end of input); ``stopped`` (the model's context
    overflowed)."""
    returns: dict[str, float]
    termination_reason: str | None
    """The game's own word for how it ended (``win``, ``draw``, ``illegal``, ...), or None
    when it did not end."""
    turns: int


def pick_seat(choice: str, agents: Sequence[str], rng: random.Random) -> str:
    """The agent the person plays: ``first``, ``second``, ``random``, a 0-based player index
    (``1`` is ``player_1``) or an agent name; a bad choice is a :class:`ConfigError`."""
    text = choice.strip().casefold()
    if text == "random":
        return rng.choice(list(agents))
    index = {"first": 0, "second": 1}.get(text)
    if index is None and text.isdigit():
        index = int(text)
    if index is None:
        if choice in agents:
            return choice
        near = did_you_mean(text, ["first", "second", "random", *agents])
        raise ConfigError(
            f"--seat {choice!r}: expected first, second, random, a player index 0.."
            f"{len(agents) - 1} or one of {list(agents)}{near}"
        )
    if not 0 <= index < len(agents):
        raise ConfigError(f"--seat {choice!r}: this game seats {len(agents)} players")
    return agents[index]


def seat_label(seat: Seat) -> str:
    """How an opponent is named on screen: the bot's or the model's participant name, or
    ``simulator ID``."""
    if isinstance(seat, SimulatorSeat):
        return f"simulator {seat.name}"
    return seat.name if isinstance(seat, BotSeat) else seat.policy_name


class SimulatorFailed(RuntimeError):
    """A simulator seat raised, outlasted its timeout or replied with no text."""


def play_human(
    env: TextGame,
    human: str,
    opponents: Mapping[str, Seat],
    *,
    seed: int | None = None,
    read_line: ReadLine = input,
    write: Write = print,
    game_id: str = "",
) -> HumanResult:
    """Reset ``env`` with ``seed`` and play it to the end: ``human`` is asked for each of its
    moves through ``read_line``; every other agent is played by its seat in ``opponents``."""
    env.reset(seed=seed)
    missing = set(env.possible_agents) - set(opponents) - {human}
    if missing:
        raise ValueError(f"no seat filler for {sorted(missing)}")
    for index, agent in enumerate(env.possible_agents):
        seat = opponents.get(agent)
        if isinstance(seat, SimulatorSeat):  # as an episode resets it
            seat.turns = 0
            seat.simulator.reset(seat_seed(seed or 0, index))
    others = ", ".join(
        f"{seat_label(opponents[a])} ({a})" for a in env.possible_agents if a != human
    )
    write(f"You play {human}, against {others}. Type 'quit' to resign, 'rules' for the rules.")
    write("")
    write(env.rules(human))
    # A bug in a game must not loop forever: every step of a live game is a move or a retry.
    steps_left = env.max_turns * (env.max_retries + 1) + 1
    while not env.is_over:
        if steps_left == 0:
            raise RuntimeError(f"{env.metadata['name']} did not end within its turn limit")
        steps_left -= 1
        agent = env.agent_selection
        if agent == human:
            action = ask_move(env, human, read_line, write)
            if action is None:
                write("you resigned; bye")
                return _result(env, human, "resigned")
            env.step(action)
            continue
        try:
            opponent_move(env, agent, opponents[agent], write, game_id)
        except ContextOverflow:
            write(f"{seat_label(opponents[agent])}'s context is full; the game stops here")
            return _result(env, human, "stopped")
        except (SimulatorFailed, MoveTimeout) as err:  # a simulator or a bot that fails to reply
            write(f"{err}; the game stops here")
            return _result(env, human, "stopped")
    write("")
    write(env.observe(human)["text"])
    result = _result(env, human, outcome_for(env, human))
    write(result_line(result, human, opponents))
    return result


def ask_move(env: TextGame, human: str, read_line: ReadLine, write: Write) -> Any | None:
    """Show ``human`` its view and legal moves, and read lines until one is a legal move; the
    action, or None when the person quits (``quit`` or the end of input)."""
    legal = env.legal_actions(human)
    listing = _listing([env.action_to_text(human, action) for action in legal])
    write("")
    write(env.observe(human)["text"])
    write(f"legal moves: {listing}")
    while True:
        try:
            line = read_line(PROMPT)
        except EOFError:
            write("")
            return None
        text = line.strip()
        if not text:
            continue
        if text.casefold() in QUIT_WORDS:
            return None
        if text.casefold() in RULES_WORDS:
            write(env.rules(human))
            write(f"legal moves: {listing}; type 'quit' to resign")
            continue
        action, reason = check_move(env, human, text, legal)
        if reason is None:
            return action
        write(f"not a legal move: {reason}; legal moves: {listing}")


def check_move(
    env: TextGame, agent: str, text: str, legal: Sequence[Any]
) -> tuple[Any, str | None]:
    """The action ``text`` names and, if it may not be played now, why not. Checked without
    stepping the game, so a person's typo never counts as an invalid attempt."""
    try:
        action = env.parse_action(agent, text)
    except Exception:  # a game's parser that chokes on odd text is still just unreadable text
        action = None
    if action is None:
        return None, f"cannot read {text!r} as a move"
    if env.free_text:
        # A free-text game's listing holds examples, not every move (the retail agent's
        # messages): the game's own rule judges the move, as it will when it is stepped.
        if not env._is_legal(agent, action):
            return action, f"{text!r} cannot be played now ({env._why_illegal(agent, action)})"
        return action, None
    if legal and action not in legal:
        return action, f"{env.action_to_text(agent, action)!r} cannot be played now"
    return action, None


def opponent_move(env: TextGame, agent: str, seat: Seat, write: Write, game_id: str = "") -> None:
    """Play one move (or one rejected attempt) of ``agent`` and say what happened
    (``game_id``: the registered id a simulator is told)."""
    label = seat_label(seat)
    if isinstance(seat, SimulatorSeat):
        text = simulate(env, agent, seat, game_id)
        env.step_text(text)
        write(f"{label} ({agent}) wrote: " + text.replace("\n", "\n  "))
        return
    if isinstance(seat, BotSeat):
        action = _bot_move(env, agent, seat)
        text = env.action_to_text(agent, action)
        env.step(action)
        write(f"{label} ({agent}) played: {text}")
        return
    write(f"{label} ({agent}) is thinking...")
    observation = env.observe(agent)["text"]
    if seat.act == CHOICE:  # picks among the legal replies by their scores: never invalid
        episode = f"play/{game_id}/{random.getrandbits(31)}"
        turn = asyncio.run(choose_turn(env, game_id, episode, seat, agent, observation, []))
        write(f"model chose: {turn.text.strip()}")
        played = turn.text if turn.action is None else env.action_to_text(agent, turn.action)
        write(f"{label} ({agent}) played: {played}")
        return
    prompt = seat.prompt(env, agent, observation)
    generation = seat.policy.generate([prompt], seat.params)[0]
    seat.remember(generation)
    # Decode the ids whole, as an episode does: the role must see whether the tag was closed.
    written = seat.chat.tokenizer.decode(generation.token_ids.tolist(), skip_special_tokens=True)
    reply = seat.role.read(written, ended=generation.finish_reason == "stop")
    shown = (seat.role.assistant_prefix() + written).strip() or "(nothing)"
    write("model replied: " + shown.replace("\n", "\n  "))
    played = _played_text(env, agent, reply.action_text)
    env.step_text(reply.action_text if reply.action_text is not None else generation.text)
    info = env.infos[agent]
    if not info["invalid"]:
        write(f"{label} ({agent}) played: {played}")
        return
    why = info["invalid_reason"] or reply.reason
    if info["forfeit"]:
        # a role game (mae-v0) takes a forfeit as the seat's turn only, and plays on
        lost = "the game" if env.is_over else "its turn; play goes on"
        write(f"{label}'s reply is not a valid move ({why}); it forfeits {lost}")
    else:
        left = env.max_retries - info["retries"] + 1
        write(
            f"{label}'s reply is not a valid move ({why}); "
            f"it tries again ({left} attempt(s) left before it forfeits)"
        )


def _bot_move(env: TextGame, agent: str, seat: BotSeat) -> object:
    """The bot's legal move, played off this thread and bounded as an episode's are
    (:mod:`arena.play.bot_moves`): a bot that blocks stops the game, named, as a simulator that
    gives no reply does (``arena play`` exits 1)."""
    try:
        return asyncio.run(BotMoves().call(legal_move, seat.bot, env, agent, timeout=seat.timeout))
    except MoveTimeout:
        raise MoveTimeout(
            f"bot {seat.name} ({agent}) gave no move in {seat.timeout:g} s, the bound on one "
            "bot move (arena.play.config.BOT_MOVE_TIMEOUT)"
        ) from None


def simulate(env: TextGame, agent: str, seat: SimulatorSeat, game_id: str = "") -> str:
    """The simulator's next text, shown what an episode shows it; :class:`SimulatorFailed`
    when it raises, outlasts its timeout or gives no text."""
    view = SimulatorView(
        game=game_id or str(env.metadata.get("name", "")),
        seat=agent,
        rules=env.rules(agent),
        observation=env.observe(agent)["text"],
        history=tuple(env.visible_posts(agent)),
        context=env.simulator_context(agent),
        turn=seat.turns,
    )
    try:
        text = asyncio.run(asyncio.wait_for(seat.simulator.respond(view), seat.timeout))
    except TimeoutError:
        raise SimulatorFailed(
            f"simulator {seat.name} gave no reply in {seat.timeout:g} s"
        ) from None
    except Exception as err:
        raise SimulatorFailed(f"simulator {seat.name} failed: {err!r}") from None
    if not isinstance(text, str):
        raise SimulatorFailed(f"simulator {seat.name} returned {type(text).__name__}, not str")
    seat.turns += 1
    return text


def outcome_for(env: TextGame, human: str) -> str:
    """``win``, ``draw`` or ``loss``: the person's return against the best other seat's
    (``team`` in a cooperative game, where every seat shares the score)."""
    if env.kind == "cooperative":
        return "team"
    mine = env.returns[human]
    best_other = max(env.returns[a] for a in env.possible_agents if a != human)
    return "win" if mine > best_other else "loss" if mine < best_other else "draw"


def result_line(result: HumanResult, human: str, opponents: Mapping[str, Seat]) -> str:
    """The last line of a game: the outcome, everyone's return and how the game ended."""
    words = {"win": "you win", "draw": "a draw", "loss": "you lose", "team": "team game over"}
    returns = ", ".join(
        f"{'you' if agent == human else seat_label(opponents[agent])} {value:+g}"
        for agent, value in result.returns.items()
    )
    ended = f" (ended: {result.termination_reason})" if result.termination_reason else ""
    return f"result: {words.get(result.outcome, result.outcome)}; returns: {returns}{ended}"


def _result(env: TextGame, human: str, outcome: str) -> HumanResult:
    return HumanResult(
        outcome=outcome,
        returns={agent: float(env.returns[agent]) for agent in env.possible_agents},
        termination_reason=env.termination_reason,
        turns=env.turn,
    )


def _played_text(env: TextGame, agent: str, action_text: str | None) -> str:
    """The canonical text of the move a reply names (read before the game steps past it)."""
    if action_text is None:
        return "nothing"
    try:
        action = env.parse_action(agent, action_text)
    except Exception:
        action = None
    return action_text if action is None else env.action_to_text(agent, action)


def _listing(names: Sequence[str]) -> str:
    if not names:
        return "(any well-formed move; see the rules)"
    if len(names) <= LISTED_MOVES_MAX:
        return ", ".join(names)
    return f"{', '.join(names[:LISTED_MOVES_MAX])}, ... ({len(names)} in all)"
