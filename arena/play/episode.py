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
:class:`EpisodeError` whose ``termination`` is ``error``: the episode is dropped, never sent.

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
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arena.play.choice import choice_logprobs, pick, reply_ids
from arena.policies.base import Policy
from arena.policies.chat import ChatFormat
from arena.policies.types import ContextOverflow, Generation, Prompt, SamplingParams
from arena.records import TERMINATIONS, Episode, SeatAssignment, Turn
from games.bots.base import Bot
from games.interaction import VisibilityError
from games.text_env import TextGame
from roles.base import Role
from simulators.base import Simulator, SimulatorView

_EMPTY_IDS = np.zeros(0, np.int32)
_EMPTY_LOGPROBS = np.zeros(0, np.float32)


@dataclass
class PolicySeat:
    """A role agent on a policy. ``trained`` seats' turns are trained on; frozen ones are not."""

    policy: Policy
    role: Role
    chat: ChatFormat
    params: SamplingParams
    policy_name: str = "main"
    trained: bool = True
    invalid_penalty: float = 0.0
    """Subtracted from the reward of a turn whose action the game rejected."""
    act: str = "generate"
    """``generate``: write a reply for the role to read; ``choice``: pick one of the legal
    replies by their scores (:mod:`arena.play.choice`)."""
    _conversation: np.ndarray | None = field(default=None, repr=False)

    def prompt(self, env: TextGame, agent: str, observation: str) -> Prompt:
        first = self._conversation is None or self.role.memory == "none"
        messages = self.role.messages(env.rules(agent), agent, observation, first_turn=first)
        if first:
            ids = self.chat.prompt_ids(Prompt(messages=messages))
        else:
            ids = self.chat.extend(self._conversation, messages)
        prefix = self.role.assistant_prefix()
        if prefix:
            ids = np.concatenate([ids, self.chat.encode_text(prefix)])
        return Prompt(ids=ids)

    def remember(self, generation: Generation) -> None:
        if self.role.memory == "conversation":
            self._conversation = generation.conversation_ids


@dataclass
class BotSeat:
    """A reference bot; its turns are recorded for transcripts but never trained on."""

    bot: Bot
    name: str


@dataclass
class SimulatorSeat:
    """A simulator (a user simulator, say); its turns are recorded but never trained on."""

    simulator: Simulator
    name: str
    """Recorded as the seat's policy (the simulator's registered id)."""
    timeout: float = 60.0
    """Seconds one reply may take before the episode ends with an error."""
    turns: int = 0


Seat = PolicySeat | BotSeat | SimulatorSeat


def request_seed(episode_id: str, turn: int) -> int:
    """The sampling seed of turn ``turn`` of episode ``episode_id``. Episode ids derive from the
    run's seed (each order's seed), so a run draws the same samples from the same seed however
    the service's batches form under load (the sampler gives each seeded row its own stream)."""
    digest = hashlib.blake2b(f"{episode_id}:{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def seat_seed(seed: int, index: int) -> int:
    """A bot's seed in seat ``index`` of the game seeded ``seed``: reproducible, and different
    per seat, so two identical bots (random against random) never draw the same stream."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


class EpisodeError(RuntimeError):
    """An episode that could not finish (a seat's policy or bot failed); it is dropped, never
    half-sent. ``seat`` names the agent whose filler failed."""

    def __init__(self, message: str, seat: str | None = None) -> None:
        super().__init__(message)
        self.seat = seat
        self.termination = "error"


async def play_episode(
    env: TextGame,
    game_id: str,
    seats: Mapping[str, Seat],
    *,
    seed: int,
    episode_id: str,
) -> Episode:
    """Play ``env`` from ``reset(seed)`` to the end and return the record."""
    env.reset(seed=seed)
    missing = set(env.possible_agents) - set(seats)
    if missing:
        raise ValueError(f"{game_id}: no seat filler for {sorted(missing)}")
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
        seat = seats[agent]
        if isinstance(seat, BotSeat):
            try:
                action = seat.bot.act(env, agent)
            except Exception as err:
                raise EpisodeError(
                    f"{game_id} episode {episode_id}: bot {seat.name} failed: {err!r}", agent
                ) from err
            text = env.action_to_text(agent, action)
            env.step(action)
            turns.append(_turn(episode_id, len(turns), game_id, agent, "bot", text, action, env))
            continue
        observation = env.observe(agent)["text"]
        _check_visibility(env, game_id, episode_id, agent, observation)
        if isinstance(seat, SimulatorSeat):
            turns.append(await _simulate(env, game_id, episode_id, seat, agent, observation, turns))
            continue
        if seat.act == "choice":
            try:
                turn = await _choose(env, game_id, episode_id, seat, agent, observation, turns)
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
            Turn(
                episode_id=episode_id,
                index=len(turns),
                game=game_id,
                seat=agent,
                role=seat.role.name,
                prompt_ids=generation.prompt_ids,
                response_ids=generation.token_ids,
                response_logprobs=generation.logprobs,
                text=seat.role.assistant_prefix() + written,
                action=_plain(
                    env.parse_action(agent, reply.action_text) if reply.action_text else None
                ),
                valid=valid,
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
    assignment = {agent: _assignment(s) for agent, s in seats.items()}
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


async def _choose(
    env: TextGame,
    game_id: str,
    episode_id: str,
    seat: PolicySeat,
    agent: str,
    observation: str,
    turns: list[Turn],
) -> Turn:
    """One turn by choice: score every legal reply, draw one, play its action, record it.

    A state with no legal action is stepped with an empty reply, which the game rejects (its
    retry and forfeit rule then apply); a legal-action list that changed between scoring and
    stepping is recorded as a turn error and not trained on."""
    index = len(turns)
    legal = list(env.legal_actions(agent))
    if not legal:
        env.step_text("")
        turn = _turn(episode_id, index, game_id, agent, seat.role.name, "", None, env)
        turn.error = "no legal action to choose from"
        return turn
    prompt = seat.prompt(env, agent, observation)
    replies = [reply_ids(seat, env, agent, action) for action in legal]
    try:
        # a policy that serves no adapters may take no adapters argument
        adapter = seat.params.adapter
        extra = () if adapter is None else ([adapter],)
        scoring = (await seat.policy.ascore([prompt], [replies], *extra))[0]
    except ContextOverflow:
        raise
    except Exception as err:
        raise EpisodeError(
            f"{game_id} episode {episode_id}: {seat.policy_name} failed to score: {err}", agent
        ) from err
    temperature = seat.params.temperature
    logprobs = choice_logprobs(scoring.sums, temperature)
    chosen = pick(logprobs, temperature, request_seed(episode_id, index))
    action = legal[chosen]
    changed = list(env.legal_actions(agent)) != legal
    env.step(action)
    valid = not env.infos[agent]["invalid"]
    prefix = seat.role.assistant_prefix()
    text = seat.chat.tokenizer.decode(replies[chosen].tolist(), skip_special_tokens=True)
    return Turn(
        episode_id=episode_id,
        index=index,
        game=game_id,
        seat=agent,
        role=seat.role.name,
        prompt_ids=scoring.prompt_ids,
        response_ids=replies[chosen],
        response_logprobs=scoring.logprobs[chosen],
        text=prefix + text,
        action=_plain(action),
        valid=valid,
        reward=0.0 if valid else -seat.invalid_penalty,
        policy_version=scoring.version,
        trained=seat.trained and not changed,
        error=(
            "the legal actions changed between scoring and stepping"
            if changed
            else turn_error(env, agent)
        ),
        choice_ids=np.concatenate(replies),
        choice_lengths=np.array([len(r) for r in replies], np.int32),
        choice_logprobs=scoring.sums.astype(np.float32),
        choice_index=chosen,
        choice_logprob=float(logprobs[chosen]),
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


def turn_error(env: TextGame, agent: str) -> str:
    """What went wrong on ``agent``'s turn just played: the rejection, or a tool's error."""
    info = env.infos[agent]
    return str(info.get("invalid_reason") or info.get("tool_error") or "")


def _assignment(seat: Seat) -> SeatAssignment:
    if isinstance(seat, PolicySeat):
        return SeatAssignment(
            role=seat.role.name,
            policy=seat.policy_name,
            trained=seat.trained,
            adapter=seat.params.adapter,
        )
    if isinstance(seat, SimulatorSeat):
        return SeatAssignment(role=seat.simulator.role, policy=seat.name, trained=False)
    return SeatAssignment(role="bot", policy=seat.name, trained=False)


def _check_visibility(
    env: TextGame, game_id: str, episode_id: str, agent: str, observation: str
) -> None:
    """Refuse to show ``agent`` a post its interaction graph forbids (see the module docstring)."""
    leaked = env.interaction.leaks(agent, observation, env.posts)
    if leaked:
        error = VisibilityError(agent, leaked[0])
        raise EpisodeError(f"{game_id} episode {episode_id}: {error}", agent) from error


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
    turn = _turn(episode_id, len(turns), game_id, agent, seat.simulator.role, text, text, env)
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


def _turn(
    episode_id: str,
    index: int,
    game_id: str,
    agent: str,
    role: str,
    text: str,
    action: Any,
    env: TextGame,
) -> Turn:
    return Turn(
        episode_id=episode_id,
        index=index,
        game=game_id,
        seat=agent,
        role=role,
        prompt_ids=_EMPTY_IDS,
        response_ids=_EMPTY_IDS,
        response_logprobs=_EMPTY_LOGPROBS,
        text=text,
        action=_plain(action),
        valid=not env.infos[agent]["invalid"],
        reward=0.0,
        policy_version=-1,
        trained=False,
    )


def _plain(action: Any) -> Any:
    """Actions as msgpack-friendly values (numpy ints become ints)."""
    if isinstance(action, np.generic):
        return action.item()
    if action is None or isinstance(action, (int, float, str, bool)):
        return action
    return str(action)
