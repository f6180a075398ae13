"""Evaluation: the policy against reference bots, with 95% confidence intervals.

The policy plays every seat in turn against bots on the others (seat ``i`` in game ``i mod n``),
greedy by default. Where the seats of a game are played by different policies (a run's named
policies, ``arena eval`` of such a run), each policy gets rows of its own: ``seats`` names the
seats each plays, and each row its ``policy``; that policy's games cycle through its seats.
For each (game, opponent) it reports:

- ``score``: the mean of 1 (win), 0.5 (draw: tied for the best return) and 0 (loss) per game
  (:func:`game_score`), with the Wilson 95% interval of the score as a proportion of points,
  ``wilson(wins + draws / 2, games)`` (:func:`score_interval`): exactly Wilson's interval of
  the win rate when no game is drawn, and conservative with draws (a score in [0, 1] with mean
  p varies at most p (1 - p)). It never collapses to a point: 20 lost games give
  ``[0, 0.161]``, not ``[0, 0]``, so one win afterwards does not count as an improvement;
- ``win`` with a Wilson 95% interval (``win_ci``); ``draw`` and ``loss``, the rates alone;
- ``invalid_rate``: invalid actions over the policy's turns, with a Wilson 95% interval
  (turns within a game are not independent, so read it as a slightly narrow interval); a bot
  evaluated in the policy's place has no policy turns (``policy_turns`` 0, ``invalid_rate`` 0
  with the interval [0, 1], and no invalid rate on its line);
- ``mean_return``: the evaluated seat's mean final return, with a normal-approximation 95%
  interval (``return_ci``, :func:`mean_ci` unclipped). The score compares the seats' returns,
  which says what it should only in a competitive game: in a cooperative one (``mini-hanabi-v0``)
  the seats share a return and every game is a draw, and in a general-sum one
  (``negotiation-v0``, ``prisoners-dilemma-v0``) outscoring the other seat is not scoring well.
  The console line shows the mean return for every game whose ``kind`` is not competitive;
- ``optimal_move_rate``: in games solved exactly (Tic-Tac-Toe, Nim:
  :mod:`arena.eval.optimal_moves`), the share of the policy's valid moves that keep the best
  outcome minimax can force, with a Wilson interval read like the invalid rate's; None elsewhere.
  Unlike the score it does not mix in forfeits or the opponent's blunders: it measures strategy.

The seat filler ``make_seat`` gives is usually a policy seat; a bot seat works too, which is how
a random-legal-mover baseline is measured with the same games and seeds.

An episode that cannot finish (:class:`~arena.play.seats.EpisodeError`: a bot, a simulator or
the policy's server failed) counts as an error of its row, as in training: it is reported
(``errors`` and the first one's reason, ``first_error``), never scored as a win or a loss, and
the other games go on. A row whose every game failed has ``games`` 0 and says so.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import games
import games.bots
from arena.core.registry import RegistryError
from arena.eval.intervals import with_interval
from arena.eval.optimal_moves import optimal_move_rate, solvable
from arena.eval.ratings import Z95, wilson
from arena.play.episode import play_episode
from arena.play.seating import resolve_opponent
from arena.play.seats import BotSeat, EpisodeError, Seat
from arena.records import Episode
from games.text_env import TextGame

RANDOM_BOT = "random-v0"


def mean_ci(values: Sequence[float], low: float = 0.0, high: float = 1.0) -> tuple[float, float]:
    """Normal-approximation 95% interval of a mean, clipped to [low, high]:
    ``mean -+ Z95 * s / sqrt(n)`` with ``s`` the sample standard deviation (n - 1 in the
    denominator), e.g. [0, 1, 1, 1]: 0.75 -+ 1.959964 * 0.5 / 2 -> (0.260009, 1.0). Fewer than
    two values give (low, high); values all equal give a zero-width interval (mean, mean)."""
    n = len(values)
    if n < 2:
        return (low, high)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = Z95 * math.sqrt(var / n)
    return (max(low, mean - half), min(high, mean + half))


def score_interval(scores: Sequence[float]) -> tuple[float, float]:
    """The 95% interval of a mean game score: ``wilson(sum(scores), len(scores))``, the Wilson
    interval with draws (0.5) counted as half a win (see the module docstring). E.g. 3 wins,
    2 draws and 5 losses: wilson(4, 10) = (0.168180, 0.687326); 20 losses: (0, 0.161125)."""
    return wilson(sum(scores), len(scores))


def game_score(episode: Episode, seat: str) -> float:
    """1 for a win (the seat's return strictly above every other seat's), 0.5 for a draw (tied
    with the best of the others: two of three seats tied on top each get 0.5), 0 for a loss."""
    mine = episode.final_rewards[seat]
    best_other = max(r for s, r in episode.final_rewards.items() if s != seat)
    if mine > best_other:
        return 1.0
    return 0.5 if mine == best_other else 0.0


@dataclass
class MatchResult:
    """The policy's results against one opponent in one game."""

    game: str
    opponent: str
    games: int
    score: float
    score_ci: tuple[float, float]
    win: float
    draw: float
    loss: float
    win_ci: tuple[float, float]
    invalid_rate: float
    invalid_ci: tuple[float, float]
    policy_turns: int
    optimal_move_rate: float | None = None
    """Share of the policy's valid moves that minimax rates optimal; None where not solved."""
    optimal_move_ci: tuple[float, float] | None = None
    optimal_moves_judged: int = 0
    """Valid moves judged for :attr:`optimal_move_rate`."""
    errors: int = 0
    """Games that could not finish (an :class:`EpisodeError`); not in :attr:`games`."""
    first_error: str = ""
    """Why the first of them failed."""
    kind: str = "competitive"
    """The game's kind (``competitive``, ``cooperative``, ``general-sum``): where it is not
    competitive, :meth:`line` shows the mean return beside the score."""
    mean_return: float = 0.0
    """The evaluated seat's mean final return over :attr:`games`."""
    return_ci: tuple[float, float] | None = None
    """Its normal-approximation 95% interval (:func:`mean_ci`, unclipped); None under 2 games."""
    policy: str = ""
    """Who played the evaluated seats, where the seats of the game are told apart by policy
    (``responder``); empty where one policy plays every seat."""

    @classmethod
    def from_episodes(
        cls,
        game: str,
        opponent: str,
        played: list[tuple[Episode, str]],
        game_kwargs: dict[str, Any] | None = None,
        errors: Sequence[str] = (),
        policy: str = "",
    ) -> MatchResult:
        """The statistics of ``played`` (episode, the evaluated seat); ``game_kwargs`` are the
        game's settings, which the optimal-move replay needs to rebuild its env; ``errors`` the
        reasons of the games that failed."""
        optimal = optimal_move_rate(played, game_kwargs) if solvable(game) else None
        if optimal is not None and not optimal.moves:
            optimal = None  # every move invalid: nothing to judge
        scores = [game_score(ep, seat) for ep, seat in played]
        returns = [float(ep.final_rewards[seat]) for ep, seat in played]
        n = len(scores)
        wins, draws = scores.count(1.0), scores.count(0.5)
        turns = [t for ep, seat in played for t in ep.turns if t.seat == seat and t.role != "bot"]
        invalid = sum(not t.valid for t in turns)
        return cls(
            game=game,
            opponent=opponent,
            games=n,
            score=sum(scores) / max(n, 1),
            score_ci=score_interval(scores),
            win=wins / max(n, 1),
            draw=draws / max(n, 1),
            loss=(n - wins - draws) / max(n, 1),
            win_ci=wilson(wins, n),
            invalid_rate=invalid / max(len(turns), 1),
            invalid_ci=wilson(invalid, len(turns)),
            policy_turns=len(turns),
            optimal_move_rate=None if optimal is None else optimal.rate,
            optimal_move_ci=None if optimal is None else wilson(optimal.optimal, optimal.moves),
            optimal_moves_judged=0 if optimal is None else optimal.moves,
            errors=len(errors),
            first_error=errors[0] if errors else "",
            kind=game_kind(game),
            mean_return=sum(returns) / max(n, 1),
            return_ci=mean_ci(returns, -math.inf, math.inf) if n > 1 else None,
            policy=policy,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (intervals as lists), the rows of ``evals.jsonl``."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}

    def line(self) -> str:
        """One console line: score, W/D/L, invalid rate and, where judged, the optimal-move rate,
        with their intervals; the games that failed, with the first reason."""
        failed = error_text(self.errors, self.first_error)
        who = f"{self.game} vs {self.opponent}" + (f", policy {self.policy}" if self.policy else "")
        if not self.games:
            return f"{who}: every game failed{failed}"
        n = self.games  # every interval of the line is judged by its games (MIN_N)
        optimal = ""
        if self.optimal_move_rate is not None and self.optimal_move_ci is not None:
            rate = with_interval(self.optimal_move_rate, self.optimal_move_ci, n)
            optimal = f"  optimal moves {rate} of {self.optimal_moves_judged}"
        invalid = ""  # a bot's turns are not the policy's: no invalid rate to read
        if self.policy_turns:
            invalid = f"  invalid {with_interval(self.invalid_rate, self.invalid_ci, n)}"
        mean_return = ""
        if self.kind != "competitive":
            ci = self.return_ci or (self.mean_return, self.mean_return)  # shown n too small
            mean_return = f"  return {with_interval(self.mean_return, ci, n)}"
        return (
            f"{who}: score {with_interval(self.score, self.score_ci, n)}"
            f"{mean_return}  W/D/L {self.win:.2f}/{self.draw:.2f}/{self.loss:.2f}"
            f"{invalid}{optimal}  ({self.games} games){failed}"
        )


def game_kind(game_id: str) -> str:
    """The registered game's ``kind`` (``competitive`` for an id the registry does not know: a
    row read back from another install's log)."""
    try:
        return games.spec(game_id).kind
    except RegistryError:  # unknown, or a plugin whose spec no longer reads
        return "competitive"


def error_text(errors: int, first: str) -> str:
    """``"  2 errors (first: ...)"``, or nothing when none failed."""
    if not errors:
        return ""
    return f"  {errors} error{'s' if errors > 1 else ''} (first: {first})"


async def play_or_error(
    env: TextGame,
    game_id: str,
    seats: Mapping[str, Seat],
    *,
    seed: int,
    episode_id: str,
    on_episode: Callable[[], None] | None = None,
) -> Episode | str:
    """:func:`play_episode`, with an episode that could not finish returned as its error's text:
    an evaluation counts it as an error of its row, never as a loss. ``on_episode`` is called
    when it ends, either way (a progress bar's tick)."""
    try:
        return await play_episode(env, game_id, seats, seed=seed, episode_id=episode_id)
    except EpisodeError as err:
        return str(err)
    finally:
        if on_episode is not None:
            on_episode()


async def evaluate(
    make_seat: Callable[[str, TextGame, str], Seat],
    game_ids: Sequence[str],
    opponents: Sequence[str],
    *,
    games_per_match: int,
    seed: int = 10_000,
    concurrency: int = 64,
    game_kwargs: dict[str, dict[str, Any]] | None = None,
    on_episode: Callable[[], None] | None = None,
    seats: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> list[MatchResult]:
    """Play ``games_per_match`` games per (game, opponent); ``make_seat(game_id, env, agent)``
    gives a fresh seat filler (a policy seat with its own conversation state, or a bot seat)
    for the evaluated seat ``agent`` of each game (a run with named policies plays the seat's
    own adapter). ``seats``: per game id, the seats each policy plays (``{"kuhn-poker-v0":
    {"main": ["player_0"], "responder": ["player_1"]}}``), ``games_per_match`` games and a row
    per policy, its games cycling through its seats; a game it leaves out is played in every
    seat, on one row with no policy named."""
    limit = asyncio.Semaphore(concurrency)
    game_kwargs = game_kwargs or {}

    async def one(
        game_id: str, opponent_id: str, index: int, agents: Sequence[str] | None
    ) -> tuple[Episode, str] | str:
        """The episode and the evaluated seat (of ``agents``: None, every one), or why the
        episode failed."""
        async with limit:
            env = games.make(game_id, **game_kwargs.get(game_id, {}))
            cycle = agents or env.possible_agents
            seat = cycle[index % len(cycle)]
            game_seed = seed + index
            seats = {
                agent: make_seat(game_id, env, agent)
                if agent == seat
                else BotSeat(games.bots.make(opponent_id, seed=game_seed), opponent_id)
                for agent in env.possible_agents
            }
            episode = await play_or_error(
                env,
                game_id,
                seats,
                seed=game_seed,
                episode_id=f"eval-{game_id}-{opponent_id}-{index}",
                on_episode=on_episode,
            )
            return episode if isinstance(episode, str) else (episode, seat)

    results = []
    for game_id in game_ids:
        groups: Mapping[str, Sequence[str] | None] = (seats or {}).get(game_id) or {"": None}
        for opponent in opponents:
            opponent_id = resolve_opponent(opponent, game_id)
            for policy, agents in groups.items():
                played = await asyncio.gather(
                    *(one(game_id, opponent_id, i, agents) for i in range(games_per_match))
                )
                results.append(
                    MatchResult.from_episodes(
                        game_id,
                        opponent_id,
                        [p for p in played if not isinstance(p, str)],
                        game_kwargs.get(game_id),
                        errors=[p for p in played if isinstance(p, str)],
                        policy=policy,
                    )
                )
    return results
