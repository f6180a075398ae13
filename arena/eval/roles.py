"""Evaluation of role games: each role of the policy against fixed references.

In a role game there is no opponent to beat; each role has its own measure. The policy plays one
seat at a time (one seat per role: ``solver_0`` stands for every solver) while the game's
reference bot (its ``strongest_bot``: scripted solvers, a ground-truth judge, a scripted agent)
fills the other seats, and simulators fill the seats the game config simulates (the scripted
user). After each episode the game's ``infos[seat]["metrics"]`` (a mapping of metric name to a
number, set when the game ends; the episode keeps it in ``stats["metrics"]``) is read; for
each (game, seat, metric) it reports the mean with a 95% interval (:func:`interval`): Wilson's when every value is 0 or 1, else the normal
approximation of :func:`arena.eval.evaluate.mean_ci`, clipped to [min(0, values), max(1, values)].

With ``tries`` > 1 every task (seed) is played ``tries`` times, and each pass/fail metric (the
0/1 metrics a game lists in ``metadata["pass_metrics"]``, such as retail's ``success``; never a
count such as ``tool_calls``, even one that happens to be 0 or 1 every time) is also reported
as pass^k for k = 1..tries: the chance that all k tries of a task succeed, estimated per task
as C(successes, k) / C(tries, k) and averaged over tasks (tau-bench's estimator,
:func:`arena.eval.pass_k.pass_hat_k`). Sample at a temperature above 0 for tries to differ.

An episode that cannot finish (a simulator that raises or returns no text, a bot that cannot
play its seat) is an error of its seat's rows, as in training: counted with the first reason,
never averaged in, the rest going on. A seat whose every episode failed gets one row with no
metric (``metric`` empty, ``mean`` None) that says so. Each row names what filled the other
seats (``seats``: ``"simulator scripted-user-v0"``, ``"bot retail-agent-v0"``).

A seat none of whose finished episodes reported a metric (an untrained model that forfeits
every episode of a game that reports nothing on a forfeit, or runs past its context before the
game ends) gets one row with no metric too, saying how they ended (``unreported``:
``{"illegal": 8}``, and the last rejection of the first: ``no episode reported metrics (8 of 8
forfeited; the first: ...)``), never no row at all.

References (:func:`reference_seat`): a seat the config gives a simulator gets it; any other
seat that a simulator may fill gets the game's reference simulator (``GameSpec.simulator``:
the retail user is ``scripted-user-v0``), since the game's strongest bot plays the other side
(the retail agent bot cannot be the user); the rest get the game's strongest bot.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import games
import games.bots
import simulators
from arena.eval.evaluate import error_text, mean_ci, play_or_error
from arena.eval.intervals import with_interval
from arena.eval.pass_k import pass_hat_k
from arena.eval.ratings import wilson
from arena.play.seats import BotSeat, PolicySeat, Seat, SimulatorSeat
from games.text_env import TextGame

SeatMaker = Callable[[str, TextGame, str, int], Seat]
"""``(game_id, env, agent, seed) -> Seat``: a fresh seat filler for one seat of one episode."""


@dataclass
class RoleResult:
    """One metric of one role."""

    game: str
    seat: str
    role: str
    metric: str
    """The game's name for it; empty on the row of a seat whose every episode failed."""
    mean: float | None
    """None when no episode finished."""
    ci: tuple[float, float] | None
    episodes: int
    """Episodes that finished and reported the metric."""
    pass_k: dict[int, float] = field(default_factory=dict)
    """pass^k for k = 1..tries, when the metric is 0/1 and tries > 1."""
    errors: int = 0
    """Episodes of this seat that could not finish (an :class:`EpisodeError`)."""
    first_error: str = ""
    """Why the first of them failed."""
    seats: dict[str, str] = field(default_factory=dict)
    """What filled each other seat: ``"simulator ID"``, ``"bot ID"`` or ``"policy NAME"``."""
    policy: str = ""
    """Who played the evaluated seat, where a run's policies tell the seats apart (``judge``);
    empty where one policy plays every seat."""
    unreported: dict[str, int] = field(default_factory=dict)
    """On the row of a seat none of whose finished episodes reported a metric (``metric`` empty,
    ``mean`` None): how they ended, by termination (``{"illegal": 8}``)."""
    unreported_reason: str = ""
    """The last rejection of the evaluated seat in the first of them (why it forfeited)."""

    def line(self) -> str:
        failed = error_text(self.errors, self.first_error)
        seat = self.seat + (f", policy {self.policy}" if self.policy else "")
        if self.unreported:
            return f"{self.game} {self.role} ({seat}): {self.unreported_text()}{failed}"
        if self.mean is None or self.ci is None:
            return f"{self.game} {self.role} ({seat}): every episode failed{failed}"
        passes = "".join(f"  pass^{k} {v:.3f}" for k, v in self.pass_k.items())
        value = with_interval(self.mean, self.ci, self.episodes)
        return (
            f"{self.game} {self.role} ({seat}): {self.metric} {value}{passes}  "
            f"({self.episodes} episodes){failed}"
        )

    def unreported_text(self) -> str:
        """``no episode reported metrics (8 of 8 forfeited; the first: ...)``."""
        return unreported_text(self.unreported, self.errors, self.unreported_reason)

    def seats_line(self) -> str:
        """Who played against the evaluated seat, e.g. ``retail-v0 agent: user = simulator
        scripted-user-v0``."""
        others = ", ".join(f"{agent} = {what}" for agent, what in self.seats.items())
        return f"{self.game} {self.seat}: {others or 'no other seat'}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


ENDINGS = {
    "illegal": "forfeited",
    "context_overflow": "ran past the context",
    "max_turns": "reached the turn limit",
    "user_stop": "were stopped by the user",
}
"""How a role row says an episode ended before its game could report metrics."""


def unreported_text(unreported: dict[str, int], errors: int, reason: str) -> str:
    """Why a seat has no metric: how its ``unreported`` episodes ended, out of all it played
    (``errors`` failed besides), and the first one's last rejection; also read by the run's
    before/after summary (:mod:`arena.eval.role_summary`)."""
    played = sum(unreported.values()) + errors
    ended = ", ".join(
        f"{n} of {played} {ENDINGS.get(how, f'ended normally ({how})')}"
        for how, n in unreported.items()
    )
    if reason:
        ended += f"; the first: {reason}"
    if set(unreported) - set(ENDINGS):  # ended as the game decided, and it set none
        ended += "; a game puts each seat's numbers in infos[seat]['metrics']"
    return f"no episode reported metrics ({ended})"


def interval(values: Sequence[float]) -> tuple[float, float]:
    """95% interval of a mean: Wilson's for a 0/1 metric (sound at 0 and 1), else the normal
    approximation."""
    if set(values) <= {0.0, 1.0}:
        return wilson(int(sum(values)), len(values))
    return mean_ci(values, min(0.0, *values), max(1.0, *values))


def role_seats(
    env: TextGame,
    simulated: Sequence[str] = (),
    policy_of: Callable[[str], str] | None = None,
) -> list[str]:
    """One seat per job the policy can do, simulated seats excepted: the first seat of each role
    and role arguments. Seats alike (mae's k solvers) stand for each other; seats of one role
    with different arguments (Search Self-Play's validator and solver, both solvers) do not,
    and neither do seats alike that ``policy_of(agent)`` says different policies play."""
    seen: dict[tuple[str, str, str], str] = {}
    for agent in env.possible_agents:
        if agent not in simulated:
            policy = policy_of(agent) if policy_of is not None else ""
            seen.setdefault((env.seat_role(agent), repr(env.role_kwargs(agent)), policy), agent)
    return list(seen.values())


def is_role_game(env: TextGame) -> bool:
    """Whether any seat plays a role other than the player's."""
    return any(env.seat_role(a) != "player-v0" for a in env.possible_agents)


def reference_seat(game_id: str, env: TextGame, agent: str, seed: int) -> Seat:
    """The reference filler of a seat the config gives no simulator: the game's reference
    simulator on a seat a simulator may fill (when the game names one), else the game's
    strongest bot (see the module docstring)."""
    spec = games.spec(game_id)
    if spec.simulator is not None and env.simulatable(agent):
        return SimulatorSeat(simulators.make(spec.simulator), spec.simulator)
    return BotSeat(games.bots.make(spec.strongest_bot, seed=seed), spec.strongest_bot)


def describe(seat: Seat) -> str:
    """What fills a seat, in a word and a name."""
    if isinstance(seat, SimulatorSeat):
        return f"simulator {seat.name}"
    if isinstance(seat, BotSeat):
        return f"bot {seat.name}"
    if isinstance(seat, PolicySeat):
        return f"policy {seat.policy_name}"
    return type(seat).__name__


async def evaluate_roles(
    make_seat: SeatMaker,
    make_reference: SeatMaker,
    game_id: str,
    *,
    tasks: int,
    tries: int = 1,
    seats: Sequence[str] | None = None,
    simulated: Sequence[str] = (),
    seed: int = 10_000,
    concurrency: int = 16,
    game_kwargs: dict[str, Any] | None = None,
    on_episode: Callable[[], None] | None = None,
    policy_of: Callable[[str], str] | None = None,
) -> list[RoleResult]:
    """Play ``tasks`` x ``tries`` episodes per evaluated seat (default: :func:`role_seats`):
    the policy (``make_seat``) in that seat, references (``make_reference``: the game's bot, or a
    simulator on ``simulated`` seats) in the others. ``policy_of(agent)``: the name of the
    policy that plays a seat, on its rows (``policy``)."""
    if tasks < 1 or tries < 1:
        raise ValueError(f"tasks and tries must be >= 1, got {tasks} and {tries}")
    kwargs = game_kwargs or {}
    probe = games.make(game_id, **kwargs)
    evaluated = list(seats) if seats is not None else role_seats(probe, simulated, policy_of)
    limit = asyncio.Semaphore(concurrency)

    fillers_seen: dict[str, dict[str, str]] = {}

    async def one(seat: str, task: int, attempt: int) -> dict[str, float] | str | tuple[str, str]:
        """The seat's metrics in one episode, or why the episode failed (text), or when it
        reported none, how it ended and the seat's last rejection (a tuple)."""
        async with limit:
            env = games.make(game_id, **kwargs)
            episode_seed = seed + task
            fillers = {
                agent: (make_seat if agent == seat else make_reference)(
                    game_id, env, agent, episode_seed
                )
                for agent in env.possible_agents
            }
            fillers_seen.setdefault(seat, {a: describe(f) for a, f in fillers.items() if a != seat})
            episode = await play_or_error(
                env,
                game_id,
                fillers,
                seed=episode_seed,
                episode_id=f"eval-{game_id}-{seat}-{task}-{attempt}",
                on_episode=on_episode,
            )
            if isinstance(episode, str):
                return episode
            metrics = episode.stats.get("metrics", {}).get(seat, {})
            if metrics:
                return metrics
            rejected = [t.error for t in episode.turns if t.seat == seat and t.error]
            return episode.termination, rejected[-1] if rejected else ""

    results = []
    for seat in evaluated:
        runs = await asyncio.gather(*(one(seat, t, a) for t in range(tasks) for a in range(tries)))
        errors = [r for r in runs if isinstance(r, str)]
        first = errors[0] if errors else ""
        others = fillers_seen.get(seat, {})
        per_metric: dict[str, list[float]] = defaultdict(list)
        for values in runs:
            if isinstance(values, dict):
                for name, value in values.items():
                    per_metric[name].append(value)
        role = probe.seat_role(seat)
        policy = policy_of(seat) if policy_of is not None else ""
        if len(errors) == len(runs):
            results.append(
                RoleResult(
                    game_id, seat, role, "", None, None, 0, {}, len(errors), first, others, policy
                )
            )
            continue
        if not per_metric:  # a row all the same, saying how its episodes ended
            unreported = [r for r in runs if isinstance(r, tuple)]
            results.append(
                RoleResult(
                    game_id,
                    seat,
                    role,
                    "",
                    None,
                    None,
                    0,
                    errors=len(errors),
                    first_error=first,
                    seats=others,
                    policy=policy,
                    unreported=dict(Counter(how for how, _ in unreported)),
                    unreported_reason=unreported[0][1],
                )
            )
        for name, values in per_metric.items():
            mean = sum(values) / len(values)
            result = RoleResult(
                game=game_id,
                seat=seat,
                role=role,
                metric=name,
                mean=mean,
                ci=interval(values),
                episodes=len(values),
                errors=len(errors),
                first_error=first,
                seats=others,
                policy=policy,
            )
            passing = name in probe.metadata.get("pass_metrics", ())
            if passing and tries > 1 and len(values) == tasks * tries:
                by_task = {
                    t: [v == 1.0 for v in values[t * tries : (t + 1) * tries]] for t in range(tasks)
                }
                result.pass_k = {k: pass_hat_k(by_task, k) for k in range(1, tries + 1)}
            results.append(result)
    return results
