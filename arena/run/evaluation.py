"""The evaluations of a run: the served policy against each opponent of ``eval.opponents``,
before (``eval.opponents_before`` where set) and after training (and every ``eval.every``
steps), logged to ``evals.jsonl``; a random legal mover in the same games against
``eval.opponents``, once; and the exact strategy readings of the end-of-run summary.

A score against the random bot mixes up format, the opponent's blunders and strategy. The
summary therefore also shows the optimal-move rate (computed by :func:`arena.eval.evaluate
.evaluate` itself, in solved games), the random mover's numbers (:func:`evaluate_baseline`) and,
for Kuhn and Leduc poker, the exploitability of the weights before and after training, read at
every information state (:func:`read_strategy`). Those reads need the model's logits, which the
served policy does not expose, so the coordinator loads the weights itself: the base model
(``config.model``) for *before*, the final checkpoint's ``model/`` directory for *after* (or,
for a shared policy served as an adapter, the base with the checkpoint's ``adapters/shared-lora``).
Each seat is read with the policy it plays: a seat on a policy with a model of its own
(:mod:`arena.run.bases`) with that model, its tokenizer and its own adapter, from its newest
checkpoint at or before the step read (:func:`base_weights`); the game's table is the union of
every seat's rows.

In a run with named policies, each evaluation row names the policy that played it, as ``arena
eval`` of the run does: a player game is played ``eval.games`` games per policy, each cycling
through the seats its policy plays (:func:`seats_by_policy`), on a row of its own (``policy``;
``main`` for the shared policy), and so is the random mover's baseline, in the same seats; a
role game's seats are told apart by policy too (``policy_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import games
import games.bots
from arena.actors.rollout import served_seats
from arena.bus import Actor
from arena.eval.evaluate import RANDOM_BOT, MatchResult, evaluate
from arena.eval.exploitability import information_states
from arena.eval.policy_reader import read_seat_at
from arena.eval.roles import (
    RoleResult,
    SeatMaker,
    evaluate_roles,
    is_role_game,
    reference_seat,
    role_seats,
)
from arena.eval.strategy_reading import StrategyReading
from arena.eval.summary import EXPLOITABILITY_PREFIX
from arena.models.adapter_shape import SHARED_ADAPTER
from arena.play.config import GameConfig
from arena.play.seating import SeatFactory, policy_label, seat_policy_name
from arena.play.seats import BotSeat, Seat
from arena.policies.chat import ChatFormat
from arena.run.bases import policy_checkpoint, shared_adapters
from arena.run.config import RunConfig
from arena.run.run_log import RunLog
from games.bots.random_bot import RandomBot
from games.text_env import TextGame
from trainers.checkpoint_dirs import ADAPTERS_DIR, STEP_DIR, list_checkpoints

if TYPE_CHECKING:
    from arena.policies.hf import HFPolicy

SAMPLING_READ_STATES = 100
"""Games with at most this many information states (Kuhn: 12; not Leduc: 936) are also read at
the training sampling temperatures: a second read is cheap there, minutes on a CPU in Leduc."""


def policy_seats(actor: Actor, config: RunConfig, chat: ChatFormat) -> SeatFactory:
    """The seats of an evaluation: the policy served now, through the inference actors, each
    request bounded by ``inference.timeout`` like the rollout actors'."""
    return served_seats(actor, config.play, chat, config.inference.timeout)


async def evaluate_policy(
    actor: Actor, config: RunConfig, chat: ChatFormat, log: RunLog, label: str, step: int
) -> list[MatchResult | RoleResult]:
    """Play ``eval.games`` games per game and opponent (tasks per role in a role game) against
    the policy served now, and log them; nothing when ``eval.games`` is 0."""
    c = config
    if not c.eval.games:
        return []
    factory = policy_seats(actor, c, chat)
    temperature = c.eval.temperature  # each seat's policy's sampling otherwise
    results = await _evaluate(
        c,
        log,
        label,
        lambda g, env, agent: factory.policy_seat(g, temperature=temperature, env=env, agent=agent),
    )
    roles = await evaluate_role_games(c, log, label, factory, temperature)
    log.evaluation(label, step, results, roles)
    return [*results, *roles]


async def evaluate_role_games(
    config: RunConfig,
    log: RunLog,
    label: str,
    factory: SeatFactory,
    temperature: float,
) -> list[RoleResult]:
    """Each role of each role game of the run against the game's references (the simulators
    its config names; else :func:`~arena.eval.roles.reference_seat`), ``eval.games`` tasks per
    role, each seat at ``temperature`` with its policy's other sampling settings."""
    c = config
    role_games = [g for g in c.games if is_role_game(games.make(g.id, **g.kwargs))]
    if not role_games:
        return []

    def policy(game_id: str, env: TextGame, agent: str, seed: int) -> Seat:
        return factory.policy_seat(
            game_id, trained=False, temperature=temperature, env=env, agent=agent
        )

    def reference(game_id: str, env: TextGame, agent: str, seed: int) -> Seat:
        if agent in factory.config_of(game_id).simulators:
            return factory.simulator_seat(game_id, env, agent)
        return reference_seat(game_id, env, agent, seed)

    def labels(game: GameConfig) -> Callable[[str], str]:
        probe = games.make(game.id, **game.kwargs)
        return lambda agent: policy_label(c.play, game, probe, agent)

    maker: SeatMaker = policy
    total = sum(
        c.eval.games * len(role_seats(games.make(g.id, **g.kwargs), list(g.simulators), labels(g)))
        for g in role_games
    )
    results: list[RoleResult] = []
    with log.progress(f"eval {label} (roles)", total) as advance:
        for game in role_games:
            results += await evaluate_roles(
                maker,
                reference,
                game.id,
                tasks=c.eval.games,
                simulated=list(game.simulators),
                seed=c.seed + 10_000,
                concurrency=c.eval.concurrency,
                game_kwargs=game.kwargs,
                on_episode=advance,
                policy_of=labels(game),
            )
    return results


async def evaluate_baseline(config: RunConfig, log: RunLog) -> list[MatchResult]:
    """A random legal mover in the policy's seat, with the games and seeds of
    :func:`evaluate_policy`: what a score (or an optimal-move rate) is worth with no skill at
    all. Bots only, so it costs what the opponents' moves cost; its invalid rate is 0. Logged
    as ``baseline``, unless there is nothing to play (``eval.games`` 0, role games only)."""
    results = await _evaluate(
        config, log, "baseline", lambda g, env, agent: BotSeat(RandomBot(), RANDOM_BOT)
    )
    if results:
        log.evaluation("baseline", 0, results)
    return results


async def _evaluate(
    config: RunConfig, log: RunLog, label: str, make_seat: Callable[[str, TextGame, str], Seat]
) -> list[MatchResult]:
    """``eval.games`` games per game (role games aside) and opponent, with the evaluation's
    seeds; none, and no progress bar, when there is nothing to play."""
    c = config
    player_games = [g for g in c.games if not is_role_game(games.make(g.id, **g.kwargs))]
    seats = {g.id: seats_by_policy(c, g) for g in player_games}
    opponents = c.eval.opponents_at(label)
    total = c.eval.games * sum(len(s) or 1 for s in seats.values()) * len(opponents)
    if not total:
        return []
    with log.progress(f"eval {label}", total) as advance:
        results = await evaluate(
            make_seat,
            [g.id for g in player_games],
            opponents,
            games_per_match=c.eval.games,
            seed=c.seed + 10_000,
            concurrency=c.eval.concurrency,
            game_kwargs={g.id: g.kwargs for g in c.games},
            on_episode=advance,
            seats=seats,
        )
    return results


def seats_by_policy(config: RunConfig, game: GameConfig) -> dict[str, list[str]]:
    """The seats of a player game each policy of the run plays, by the name its rows carry
    (:func:`~arena.play.seating.policy_label`); empty (every seat, one row with no policy) in a
    run without named policies."""
    if not config.play.policies:
        return {}
    env = games.make(game.id, **game.kwargs)
    out: dict[str, list[str]] = {}
    for agent in env.possible_agents:
        if agent not in game.simulators:
            out.setdefault(policy_label(config.play, game, env, agent), []).append(agent)
    return out


def readable_games(config: RunConfig) -> list[str]:
    """The run's games whose exploitability the run reads (Kuhn, Leduc): none where
    ``eval.exploitability`` is false, or left unset with ``eval.games`` 0."""
    if not config.eval.reads_strategy:
        return []
    return [g.id for g in config.games if g.id in EXPLOITABILITY_PREFIX]


def read_bases(config: RunConfig) -> list[str]:
    """The policies with a model of their own that play a seat of a readable game: what a
    strategy read loads beside the shared policy."""
    play, readable = config.play, readable_games(config)
    names: list[str] = []
    for game in (g for g in config.games if g.id in readable):
        env = games.make(game.id)
        for agent in env.possible_agents:
            name = seat_policy_name(play, game, env, agent)
            spec = play.spec_of(name)
            if name is not None and spec is not None and spec.own_base and name not in names:
                names.append(name)
    return names


def base_weights(
    config: RunConfig, run_dir: Path, step: int | None
) -> tuple[dict[str, str], list[str]]:
    """What each policy of :func:`read_bases` is read with at the run's ``step`` (None: before
    training): its ``model`` spec before training and when frozen (``train: false``); else its
    newest checkpoint's ``model/`` under ``checkpoints/policies/<policy>/`` whose step is at
    most ``step``. Returns those weights by policy, and the trained policies that had no such
    checkpoint (read on their ``model`` spec instead)."""
    weights: dict[str, str] = {}
    missing: list[str] = []
    for name in read_bases(config):
        spec = config.play.policies[name]
        weights[name] = str(spec.model)
        if step is None or not spec.train:
            continue
        found = policy_checkpoint(run_dir, name, step)
        if found:
            weights[name] = str(found[1] / "model")
        else:
            missing.append(name)
    return weights, missing


def final_checkpoint(config: RunConfig, path: str | None = None) -> tuple[int, Path] | None:
    """(step, directory) of the checkpoint to read as the run's final weights: ``path`` (what
    the learner's last ``checkpoint`` request returned) when it holds a model, else the newest
    complete one under ``learner.checkpoint.dir``; None when there is none."""
    if path:
        match = STEP_DIR.match(Path(path).name)
        if match and (Path(path) / "model").is_dir():
            return int(match.group(1)), Path(path)
    root = config.learner.checkpoint.dir
    found = [(s, p) for s, p in list_checkpoints(root) if (p / "model").is_dir()] if root else []
    return found[-1] if found else None


def read_strategy(
    config: RunConfig,
    chat: ChatFormat,
    label: str,
    model: str,
    step: int,
    bases: Mapping[str, str] | None = None,
) -> list[StrategyReading]:
    """Read the weights ``model`` (a model spec or an HF directory) at every information state
    of each readable game of the run, loaded in the inference actors' dtype and device.

    Each seat is read with the policy it plays: the shared policy (``model``, through the
    adapter its seat plays) or a policy with a model of its own (:func:`read_bases`), read with
    ``bases[policy]`` (a model spec or a checkpoint's ``model/``; :func:`base_weights`; by
    default its ``model`` spec) and that model's tokenizer and chat template. The game's table
    is the union of every seat's rows.

    Each game is read at the evaluation's temperature (``eval.temperature``, every seat; 0:
    greedy) and, when the game is small (:data:`SAMPLING_READ_STATES`) and a seat samples at
    another temperature in training, at the training sampling temperatures: each seat at its
    policy's (``policies.NAME.sampling.temperature``, else the run's ``sampling.temperature``;
    a frozen policy's may be 0, greedy), recorded as the run's ``sampling.temperature`` with the
    seats read at another in ``seat_temperatures``. The policy as evaluated, and as trained. The
    seat is built as evaluation builds it (the game's role and settings, the run's chat
    template). Blocking: call it off the event loop.

    Cost, SmolLM2-135M in bf16 on 2 busy CPU cores: Kuhn (12 states) about 3 s a read, Leduc
    (936 states, ~160-token prompts) about 13 minutes a read, plus a second or two per load.
    """
    game_ids = readable_games(config)
    if not game_ids:
        return []
    named = shared_adapters(config.play)
    policy = reading_policy(config, model, config.model, config.learner.name, named)
    own = {**{n: str(config.play.policies[n].model) for n in read_bases(config)}, **(bases or {})}
    loaded: dict[str, HFPolicy] = {}

    def remote(name: str) -> HFPolicy:
        if name not in loaded:
            base = str(config.play.policies[name].model)
            loaded[name] = reading_policy(config, own.get(name, base), base, name, [])
        return loaded[name]

    factory = SeatFactory(
        config.play, policy, chat, remote=remote, chat_of=lambda name: remote(name).chat
    )
    out = []
    for game_id in game_ids:
        env = games.make(game_id)
        seats = {a: factory.policy_seat(game_id, env=env, agent=a) for a in env.possible_agents}
        for agent, seat in seats.items():
            seat.trained = False
            if seat.params.adapter and not seat.policy.adapters():
                # named adapters before training: none saved yet, and each fresh one is the base
                seats[agent] = replace(seat, params=replace(seat.params, adapter=None))
        read_with = {
            s.policy_name: own[s.policy_name] for s in seats.values() if s.policy_name in own
        }
        # each seat as its policy samples in training: its own sampling's temperature
        sampled = {agent: seat.params.temperature for agent, seat in seats.items()}
        reads: list[tuple[float, bool, dict[str, float]]] = [(config.eval.temperature, False, {})]
        if (
            any(t != config.eval.temperature for t in sampled.values())
            and len(information_states(game_id)) <= SAMPLING_READ_STATES
        ):
            reads.append((config.sampling.temperature, True, sampled))
        for temperature, sampling, seat_temperatures in reads:
            reading = read_seat_at(
                game_id, seats, temperature=temperature, seat_temperatures=seat_temperatures
            )
            out.append(
                StrategyReading(
                    game=game_id,
                    label=label,
                    temperature=temperature,
                    exploitability=reading.exploitability,
                    invalid_mass=reading.invalid_mass,
                    step=step,
                    model=model,
                    sampling=sampling,
                    seconds=reading.seconds,
                    policy=reading.table,
                    policies=read_with,
                    seat_temperatures=reading.seat_temperatures,
                )
            )
    return out


def reading_policy(
    config: RunConfig, weights: str, base: str, name: str, named: list[str]
) -> HFPolicy:
    """``weights`` loaded to be read as they were served, in the inference actors' dtype and
    device: a checkpoint's ``model/`` with the ``named`` adapters beside it (``adapters/``;
    before training there are none, and every fresh adapter is the base exactly), or, where the
    policy's own LoRA was served unmerged (``adapters/shared-lora`` beside it, no named
    adapters), ``base`` with that adapter played by default: its ``model/`` holds it merged,
    which a bf16 copy rounds away."""
    # torch only here: the trainer imports this module at every start, and reads only at evals
    from arena.models import load_model
    from arena.models.lora_files import CONFIG_FILE
    from arena.policies.hf import HFPolicy

    folder = Path(weights)
    adapters = folder.parent / ADAPTERS_DIR
    shared = adapters / SHARED_ADAPTER
    served_unmerged = not named and folder.is_dir() and (shared / CONFIG_FILE).is_file()
    inference = config.inference
    policy = HFPolicy(
        *load_model(
            base if served_unmerged else weights, dtype=inference.dtype, device=inference.device
        ),
        name=name,
    )
    if named and folder.is_dir() and adapters.is_dir():
        for adapter in named:
            policy.load_adapter(adapter, str(adapters / adapter), base=base)
    if served_unmerged:
        policy.load_adapter(SHARED_ADAPTER, str(shared), base=base)
        policy.serve_by_default(SHARED_ADAPTER)
    return policy
