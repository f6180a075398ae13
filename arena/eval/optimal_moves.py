"""The rate of optimal moves: how often a policy's moves keep the best outcome minimax can force.

A score against the random bot mixes up format (invalid replies forfeit), luck (random blunders)
and strategy. In a small solved game the strategy part can be measured exactly, move by move:
replay each recorded game in a fresh env and, at each of the policy's valid moves, solve the
position by exhaustive negamax and ask whether the move played is one of the optimal ones.

*Optimal* is the game-theoretic notion: a move is optimal when it keeps the best outcome the
mover can force (a win stays a win, a draw stays at least a draw). It is judged on the sign of
the exact value (``+`` win, ``0`` draw, ``-`` loss, with perfect play afterwards), so a slower
but still forced win counts as optimal, and in a lost position every move does. The values are
those of ``minimax-v0`` (:class:`games.bots.minimax.AlphaBetaBot` without a depth limit:
discounted by :data:`~games.bots.minimax.DISCOUNT` per move), so each judgement also says whether
the move is one the minimax bot itself would pick (the quickest win, the slowest loss):
:attr:`MoveJudgement.minimax_choice`.

Only games whose every position the search can solve in a blink are judged
(:data:`SOLVED_GAMES`): Tic-Tac-Toe (5,478 positions) and Nim (a few hundred with the default
heaps). Connect Four is not exact at any affordable depth.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import games
from arena.records import Episode
from games.bots.minimax import DISCOUNT
from games.position import Position

SOLVED_GAMES = frozenset({"tictactoe-v0", "nim-v0"})
"""Games whose positions :func:`exact_value` solves exactly and cheaply."""
TIE = 1e-9
"""Values closer than this are equal (they are products of powers of :data:`DISCOUNT`)."""


def solvable(game_id: str) -> bool:
    """Whether the moves of ``game_id`` can be judged exactly."""
    return game_id in SOLVED_GAMES


@functools.lru_cache(maxsize=1 << 20)
def exact_value(position: Position) -> float:
    """The position's value for the player to move under perfect play, discounted per move as
    ``minimax-v0`` does: ``> 0`` a forced win, ``0`` a draw, ``< 0`` a forced loss.

    Plain memoized negamax (no pruning, so every cached value is exact, never a bound); positions
    are hashable and shared between games, so the cache fills once per process.
    """
    result = position.result()
    if result is not None:
        return result[position.player]
    return max(-DISCOUNT * exact_value(position.play(move)) for move in position.moves())


def move_values(position: Position) -> dict[int, float]:
    """Each legal move -> its exact value for the player making it."""
    return {move: -DISCOUNT * exact_value(position.play(move)) for move in position.moves()}


def outcome(value: float) -> int:
    """The game-theoretic outcome of an exact value: 1 win, 0 draw, -1 loss."""
    return 0 if abs(value) <= TIE else (1 if value > 0 else -1)


def optimal_moves(position: Position) -> set[int]:
    """The moves that keep the best outcome the mover can force."""
    values = move_values(position)
    best = outcome(max(values.values()))
    return {move for move, value in values.items() if outcome(value) == best}


@dataclass(frozen=True)
class MoveJudgement:
    """One move of the judged seat, with the exact values that rate it."""

    position: Position
    """The position before the move."""
    action: int
    value: float
    """The move's exact value for the mover."""
    best: float
    """The highest exact value among the legal moves."""

    @property
    def optimal(self) -> bool:
        """The move keeps the best outcome the mover can force."""
        return outcome(self.value) == outcome(self.best)

    @property
    def minimax_choice(self) -> bool:
        """The move is one ``minimax-v0`` would pick: of the highest discounted value."""
        return self.value >= self.best - TIE


def judge_episode(
    episode: Episode, seat: str, game_kwargs: Mapping[str, Any] | None = None
) -> list[MoveJudgement]:
    """Replay ``episode`` in a fresh env (built with ``game_kwargs``, as it was played) and judge
    every valid move of ``seat``, whoever made it (a model or a bot). Invalid turns left the
    position unchanged, so they are skipped; a replay that disagrees with the record (another
    mover than recorded, a valid turn with no recorded action, a recorded valid move the env
    rejects) raises ``ValueError``."""
    if not solvable(episode.game):
        raise ValueError(f"{episode.game} is not solved exactly; judged games: {SOLVED_GAMES}")
    env = games.make(episode.game, **dict(game_kwargs or {}))
    env.reset(seed=episode.seed)
    judged = []
    for turn in episode.turns:
        if not turn.valid:
            continue
        if env.is_over or env.agent_selection != turn.seat:
            raise ValueError(
                f"episode {episode.id}: turn {turn.index} of {turn.seat} does not follow the "
                f"replay (to move: {None if env.is_over else env.agent_selection})"
            )
        if turn.action is None:
            raise ValueError(f"episode {episode.id}: valid turn {turn.index} records no action")
        action = int(turn.action)
        if turn.seat == seat:
            position = env.position()
            values = move_values(position)
            if action not in values:
                raise ValueError(f"episode {episode.id}: turn {turn.index} plays illegal {action}")
            judged.append(MoveJudgement(position, action, values[action], max(values.values())))
        env.step(action)
        if env.infos[turn.seat]["invalid"]:
            raise ValueError(f"episode {episode.id}: the env rejected turn {turn.index}")
    return judged


@dataclass(frozen=True)
class OptimalMoveRate:
    """The share of a seat's valid moves that are optimal, over some games."""

    optimal: int
    moves: int
    minimax_choices: int = 0
    """Moves ``minimax-v0`` itself would pick (a stricter count: quickest win, slowest loss)."""
    unreplayable: int = 0
    """Episodes left out because their replay disagreed with the record (see
    :func:`judge_episode`); an evaluation should not die of one odd record."""

    @property
    def rate(self) -> float:
        return self.optimal / self.moves if self.moves else float("nan")


def optimal_move_rate(
    played: Iterable[tuple[Episode, str]], game_kwargs: Mapping[str, Any] | None = None
) -> OptimalMoveRate:
    """Judge the given seat's valid moves over every (episode, seat) of ``played``."""
    judged: list[MoveJudgement] = []
    unreplayable = 0
    for episode, seat in played:
        try:
            judged += judge_episode(episode, seat, game_kwargs)
        except ValueError:
            unreplayable += 1
    return OptimalMoveRate(
        optimal=sum(j.optimal for j in judged),
        moves=len(judged),
        minimax_choices=sum(j.minimax_choice for j in judged),
        unreplayable=unreplayable,
    )
