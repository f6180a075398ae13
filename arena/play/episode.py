"""Play one episode of a game with its seats filled, and record it as an :class:`Episode`.

A seat is filled by a :class:`PolicySeat` (a role agent on a policy: trained, or frozen) or by a
:class:`BotSeat` (a reference bot). An episode awaits its policy's replies and never blocks on
them, so a rollout actor plays many episodes at once and their requests batch together in the
inference service.

Token-in, token-out: a policy seat builds its prompt ids here, once, with the model's chat
template, and each :class:`~arena.records.Turn` keeps exactly the ids the sampler saw. With
``conversation`` memory the next prompt extends the previous prompt and response ids; nothing is
re-tokenized.

A policy seat acts in one of two ways (its ``act``): it *generates* a reply that its role reads,
or it *chooses* one of the legal replies by their scores (:mod:`arena.play.choice`), which
records every legal reply's log-probability on the turn. Either way each request carries its own
sampling seed, derived from the episode id and the turn index (:func:`request_seed`), so a run
repeats from its seed whatever order the inference service's batches form in.

Rewards: a turn's reward is its shaping (the role's format bonus, minus ``invalid_penalty`` for
an invalid action); the seat's game return (win, loss, forfeit) is added to its last turn.

Groups: each policy turn carries the prompt-group id that the ``group`` and ``broadcast``
advantage modes normalize over (trainers/advantages.py). By default it is
``f"{game}:{seed}:{seat}"``: the attempts of one seat from one start (the same deal or board).
A rollout actor plays ``rollout.group_size`` episodes per seed with the same seats and opponent
(arena/actors/rollout.py), so those attempts are comparable and their spread is the signal. An
episode's own id must never be part of it: a group of one trajectory carries no signal.
A :class:`SimulatorSeat` fills a seat with a simulator (simulators/base.py): a user simulator
that is not trained. Its turns are recorded with its role (``simulated_user``), no token ids and
``trained=False``. A simulator that raises or outlasts its ``timeout`` ends the episode with an
:class:`EpisodeError` whose ``termination`` is ``error``: the episode is dropped, never sent. So
does the game's own code raising (its ``step``, its observation text, its role's parser): that
one episode fails, named with ``the game failed: ...``, and the other episodes go on.

Bounds: a run bounds each episode by turns and by seconds (``rollout.max_episode_turns``,
``rollout.episode_timeout``, passed to :func:`play_episode`). A game that never ends (a plugin
with a huge ``max_turns``, or one that never sets its terminations) would otherwise hold its
rollout job until the job's lease ran out, to be leased again with the same seed and loop
again. Past either bound the episode fails with an :class:`EpisodeError` naming the game, the
episode and the bound: dropped, counted and never trained on, like any failed episode.
A bot's move is played off the event loop, on the process's bot-move thread, and bounded by
its seat's ``timeout`` (:data:`~arena.play.config.BOT_MOVE_TIMEOUT`, 120 s, wherever a bot
plays) as well as by the episode's clock (:mod:`arena.play.bot_moves`): a plugin bot that blocks
mid-episode fails that episode, named with its seat, instead of freezing the process.

Visibility: before a seat is prompted (or a simulator asked), its observation is checked against
the game's interaction graph (:meth:`games.interaction.Interaction.leaks`): the text of a post the
seat may not see must not be in it. A leak ends the episode with an :class:`EpisodeError`, so a
game bug never trains a policy on what it should not have known.

Metrics: a role game may put its roles' headline numbers in ``infos[seat]["metrics"]`` when it
ends (solver accuracy, judge accuracy, task success); they are kept in the episode's
``stats["metrics"]`` per seat, for training logs and role evaluation.

A game can set the group itself (role games, where what is comparable is the game's business,
e.g. solvers of one proposed task): if ``env.infos[seat]`` holds a ``"group"`` key after the
seat's step, its value (as a string, used as is) is that turn's group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping

from arena.play.acting import CHOICE
from arena.play.bot_moves import BotMoves, MoveTimeout
from arena.play.choice import choose_turn
from arena.play.config import MAX_EPISODE_TURNS
from arena.play.seats import (
    BotSeat,
    EpisodeError,
    PolicySeat,
    Seat,
    SimulatorSeat,
    record_turn,
    request_seed,
    seat_assignment,
    seat_seed,
    turn_error,
)
from arena.policies.types import ContextOverflow
from arena.records import TERMINATIONS, Episode, Turn
from games.bots.base import legal_move
from games.interaction import VisibilityError
from games.text_env import TextGame
from simulators.base import SimulatorView


async def play_episode(
    env: TextGame,
    game_id: str,
    seats: Mapping[str, Seat],
    *,
    seed: int,
    episode_id: str,
    max_turns: int | None = MAX_EPISODE_TURNS,
    timeout: float | None = None,
) -> Episode:
    """Play ``env`` from ``reset(seed)`` to the end and return the record; an
    :class:`EpisodeError` when it cannot finish, the game's own code raising included.

    ``max_turns`` and ``timeout`` bound the episode (a run's ``rollout.max_episode_turns`` and
    ``rollout.episode_timeout``; evaluations and tournaments keep the default turn bound,
    :data:`~arena.play.config.MAX_EPISODE_TURNS`, and no clock; None: unbounded), whatever the
    game's own limits: one that has
    played ``max_turns`` turns (every seat's, rejected ones included) and is not over, or is
    still playing after ``timeout`` seconds, fails with an :class:`EpisodeError` naming the
    bound (termination ``max_turns``, resp. ``error``). The clock is checked while the
    episode awaits (a policy, a simulator, a bot's move: bots play off the event loop, each
    move also bounded by its seat's ``timeout``, :mod:`arena.play.bot_moves`); only a game's
    own code (its ``step``) runs on the loop unbounded."""
    missing = set(env.possible_agents) - set(seats)
    if missing:
        raise ValueError(f"{game_id}: no seat filler for {sorted(missing)}")
    clock = asyncio.timeout(timeout)
    moves = BotMoves()
    try:
        async with clock:
            return await _play(
                env, game_id, seats, seed=seed, episode_id=episode_id, limit=max_turns, moves=moves
            )
    except EpisodeError:
        raise
    except Exception as err:  # the game's (or its role's) own bug: this episode, not the job
        if isinstance(err, TimeoutError) and clock.expired():
            during = f" ({moves.moving} was still moving)" if moves.moving else ""
            raise EpisodeError(
                f"{game_id} episode {episode_id}: not over after {timeout:g} s, the bound "
                f"on one episode (rollout.episode_timeout){during}"
            ) from None
        raise EpisodeError(f"{game_id} episode {episode_id}: the game failed: {err!r}") from err


async def _play(
    env: TextGame,
    game_id: str,
    seats: Mapping[str, Seat],
    *,
    seed: int,
    episode_id: str,
    limit: int | None = None,
    moves: BotMoves,
) -> Episode:
    env.reset(seed=seed)
    for index, agent in enumerate(env.possible_agents):
        seat = seats[agent]
        if isinstance(seat, PolicySeat):
            seat._conversation = None
        elif isinstance(seat, SimulatorSeat):
            seat.turns = 0
            seat.simulator.reset(seat_seed(seed, index))
        else:
            seat.bot.reset(seat_seed(seed, index))
    turns: list[Turn] = []
    metrics: dict[str, dict[str, float]] = {}
    started = time.monotonic()
    termination: str | None = None
    while env.agents:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            metrics[agent] = _metrics(env, agent)  # before step(None) drops its infos
            env.step(None)
            continue
        if limit is not None and len(turns) >= limit:
            raise EpisodeError(
                f"{game_id} episode {episode_id}: not over after {limit} turns, the bound "
                "on one episode (rollout.max_episode_turns); the game did not end it",
                termination="max_turns",
            )
        seat = seats[agent]
        if isinstance(seat, BotSeat):
            action = await _bot_move(env, game_id, episode_id, seat, agent, moves)
            text = env.action_to_text(agent, action)
            env.step(action)
            turns.append(
                record_turn(episode_id, len(turns), game_id, agent, "bot", text, action, env)
            )
            continue
        observation = env.observe(agent)["text"]
        if not isinstance(observation, str):  # a prompt of "None" would be trained on
            raise EpisodeError(
                f"{game_id} episode {episode_id}: the game failed: its observation for {agent} "
                f"is {type(observation).__name__}, not text (TextGame.observation_text)",
                agent,
            )
        _check_visibility(env, game_id, episode_id, agent, observation)
        if isinstance(seat, SimulatorSeat):
            turns.append(await _simulate(env, game_id, episode_id, seat, agent, observation, turns))
            continue
        if seat.act == CHOICE:
            try:
                turn = await choose_turn(env, game_id, episode_id, seat, agent, observation, turns)
            except ContextOverflow:
                termination = "context_overflow"
                break
            turn.group = turn_group(env, game_id, seed, agent)
            turns.append(turn)
            continue
        params = dataclasses.replace(seat.params, seed=request_seed(episode_id, len(turns)))
        try:
            prompt = seat.prompt(env, agent, observation)
            generation = (await seat.policy.agenerate([prompt], params))[0]
        except ContextOverflow:
            termination = "context_overflow"
            break
        except Exception as err:
            raise EpisodeError(
                f"{game_id} episode {episode_id}: {seat.policy_name} failed: {err}", agent
            ) from err
        seat.remember(generation)
        # Decode the sampled ids whole: the generation's text stops before a matched stop
        # string, and the role needs to see whether the closing tag was written.
        written = seat.chat.tokenizer.decode(
            generation.token_ids.tolist(), skip_special_tokens=True
        )
        reply = seat.role.read(written, ended=generation.finish_reason == "stop")
        env.step_text(reply.action_text if reply.action_text is not None else generation.text)
        valid = not env.infos[agent]["invalid"]
        shaping = seat.role.format_reward(reply) - (0.0 if valid else seat.invalid_penalty)
        turns.append(
            record_turn(
                episode_id,
                len(turns),
                game_id,
                agent,
                seat.role.name,
                seat.role.assistant_prefix() + written,
                env.parse_action(agent, reply.action_text) if reply.action_text else None,
                env,
                prompt_ids=generation.prompt_ids,
                response_ids=generation.token_ids,
                response_logprobs=generation.logprobs,
                reward=shaping,
                policy_version=generation.version,
                trained=seat.trained,
                group=turn_group(env, game_id, seed, agent),
                error=turn_error(env, agent),
            )
        )
    final = {agent: float(env.returns[agent]) for agent in env.possible_agents}
    if termination is None:
        termination = env.termination_reason if env.termination_reason in TERMINATIONS else "done"
    _credit_outcome(turns, final)
    assignment = {agent: seat_assignment(s) for agent, s in seats.items()}
    policy_turns = [t for t in turns if isinstance(seats[t.seat], PolicySeat)]
    stats = {
        "turns": len(turns),
        "policy_turns": len(policy_turns),
        "invalid_turns": sum(not t.valid for t in policy_turns),
        "generated_tokens": int(sum(len(t.response_ids) for t in policy_turns)),
        "seconds": round(time.monotonic() - started, 3),
    }
    if any(metrics.values()):
        stats["metrics"] = {seat: m for seat, m in metrics.items() if m}
    return Episode(
        id=episode_id,
        game=game_id,
        seed=seed,
        seats=assignment,
        turns=turns,
        final_rewards=final,
        termination=termination,
        stats=stats,
    )


def turn_group(env: TextGame, game_id: str, seed: int, agent: str) -> str:
    """The prompt-group id of ``agent``'s turn just played (see the module docstring): the
    game's own ``infos[agent]["group"]`` when it gives one, else game, seed and seat."""
    group = env.infos[agent].get("group")
    return str(group) if group is not None else f"{game_id}:{seed}:{agent}"


def _metrics(env: TextGame, agent: str) -> dict[str, float]:
    """The headline numbers a role game reports for ``agent``'s role when it ends
    (``infos[agent]["metrics"]``), as plain floats."""
    found = env.infos[agent].get("metrics")
    return {str(k): float(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def _check_visibility(
    env: TextGame, game_id: str, episode_id: str, agent: str, observation: str
) -> None:
    """Refuse to show ``agent`` a post its interaction graph forbids (see the module docstring)."""
    leaked = env.interaction.leaks(agent, observation, env.posts)
    if leaked:
        error = VisibilityError(agent, leaked[0])
        raise EpisodeError(f"{game_id} episode {episode_id}: {error}", agent) from error


async def _bot_move(
    env: TextGame, game_id: str, episode_id: str, seat: BotSeat, agent: str, moves: BotMoves
) -> object:
    """The bot's legal move, played on the bot-move thread and bounded by the seat's
    ``timeout`` (:mod:`arena.play.bot_moves`); a bot that raises, plays an illegal move or
    takes longer fails the episode, named."""
    moves.moving = f"bot {seat.name} (seat {agent})"
    try:
        action = await moves.call(legal_move, seat.bot, env, agent, timeout=seat.timeout)
    except MoveTimeout:
        raise EpisodeError(
            f"{game_id} episode {episode_id}: bot {seat.name} (seat {agent}) gave no move in "
            f"{seat.timeout:g} s, the bound on one bot move (arena.play.config.BOT_MOVE_TIMEOUT); "
            "its thread is left behind",
            agent,
        ) from None
    except Exception as err:
        raise EpisodeError(
            f"{game_id} episode {episode_id}: bot {seat.name} failed: {err!r}", agent
        ) from err
    moves.moving = None
    return action


async def _simulate(
    env: TextGame,
    game_id: str,
    episode_id: str,
    seat: SimulatorSeat,
    agent: str,
    observation: str,
    turns: list[Turn],
) -> Turn:
    """One simulator turn: ask it (bounded by its timeout), step its text, record it."""
    view = SimulatorView(
        game=game_id,
        seat=agent,
        rules=env.rules(agent),
        observation=observation,
        history=tuple(env.visible_posts(agent)),
        context=env.simulator_context(agent),
        turn=seat.turns,
    )
    try:
        text = await asyncio.wait_for(seat.simulator.respond(view), seat.timeout)
    except TimeoutError as err:
        raise EpisodeError(
            f"{game_id} episode {episode_id}: simulator {seat.name} gave no reply in "
            f"{seat.timeout:g} s",
            agent,
        ) from err
    except Exception as err:
        raise EpisodeError(
            f"{game_id} episode {episode_id}: simulator {seat.name} failed: {err!r}", agent
        ) from err
    if not isinstance(text, str):
        raise EpisodeError(
            f"{game_id} episode {episode_id}: simulator {seat.name} returned "
            f"{type(text).__name__}, not str",
            agent,
        )
    seat.turns += 1
    env.step_text(text)
    turn = record_turn(episode_id, len(turns), game_id, agent, seat.simulator.role, text, text, env)
    turn.error = turn_error(env, agent)
    return turn


def _credit_outcome(turns: list[Turn], final: Mapping[str, float]) -> None:
    """Add each seat's game return to its last policy turn (turn-level returns carry it back)."""
    last: dict[str, Turn] = {}
    for turn in turns:
        if turn.role != "bot":
            last[turn.seat] = turn
    for seat, turn in last.items():
        turn.reward += final[seat]
