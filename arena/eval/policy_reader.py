"""Read a seat's whole policy, one information state at a time, and measure its exploitability.

Exploitability (:mod:`arena.eval.exploitability`) needs the policy as a table over every
information state. A reference bot with a table hands it over; the random bot is uniform. A
language-model seat has no table: its policy is the distribution of its replies. This module asks
the seat at every information state, exactly as play would (the env is put into the state with
:func:`~arena.eval.exploitability.reach`, and the prompt ids come from
:meth:`PolicySeat.prompt <arena.play.seats.PolicySeat.prompt>` on that env's observation,
role and chat template included), then scores the reply of each legal action by teacher forcing:
the sum of the log-probabilities of the reply's tokens after the prompt ids, with the logits
divided by the read's temperature.

The reply of an action is the canonical one the role reads back: the action text wrapped in the
role's output format (``<answer>bet</answer>``), less the part the role prefills into the prompt,
ending with the closing tag where the seat's stop string ends generation. Its last token is
scored together with every token that extends it (``>`` with ``>.``, ``>\n``, ...): sampling any
of them completes the closing tag, so generation stops there and the reply reads the same (a
model that learned to write ``</answer>.`` is read as playing its move, not as replying
nothing). The policy read is the softmax of those log-probabilities over the legal actions. The
mass on no legal reply, 1 - sum over the legal actions of exp(log-prob), is reported as the
state's *invalid mass*; it is an upper bound on the probability of an invalid reply, since
variants the game would still accept (another casing, another tokenization of the same text)
count in it too.

With ``conversation`` memory, the seat's earlier turns on the way to a state are in its context;
the reader puts the canonical reply of each earlier action there, as play with those replies would.

The agents of a game need not play one policy: :func:`read_seats` reads each agent's
information states with that agent's own seat (its policy's model, tokenizer, chat template and
adapter, and, where ``seat_temperatures`` gives one, its own temperature), and the game's table is
the union of every agent's rows; a run whose seats play models
of their own is read so (:func:`arena.run.evaluation.read_strategy`). :func:`read_seat` is the
case of one seat playing every agent.

The caller loads the models: ``arena.eval`` may not import ``arena.models``
(tests/test_layers.py), so the reads score with each seat's policy's model (``HFPolicy.model``)
or the ``model=`` / ``models=`` given.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import games
from arena.eval.exploitability import (
    InfoState,
    bot_table,
    exploitability,
    information_states,
    openspiel_game,
    reach,
)
from arena.play.acting import CHOICE
from arena.play.choice import choice_logprobs, reply_ids
from arena.play.seats import BotSeat, PolicySeat
from games.bots.base import Bot


@dataclass
class PolicyReading:
    """A policy read at every information state of a game, and its exploitability."""

    game_id: str
    table: dict[str, list[float]]
    """Information-state string -> probability of each action id (zero off the legal ones)."""
    invalid_mass: float = 0.0
    """Mean over information states of :attr:`state_invalid_mass` (0 for a bot)."""
    state_invalid_mass: dict[str, float] = field(default_factory=dict)
    """Per information state: the reply mass on no legal action's canonical reply."""
    exploitability: float = float("nan")
    """Of :attr:`table`, in chips per hand; computed on construction."""
    temperature: float = 1.0
    """The temperature the read's seats play at (0: greedy), but those in
    :attr:`seat_temperatures`."""
    seconds: float = 0.0
    """Wall time of the read."""
    seat_temperatures: dict[str, float] = field(default_factory=dict)
    """Agent -> the temperature its rows were read at, for each agent read at a temperature
    other than :attr:`temperature` (seats whose policies sample at temperatures of their own);
    empty where every agent was."""

    def __post_init__(self) -> None:
        if math.isnan(self.exploitability):
            self.exploitability = exploitability(self.game_id, self.table)


@dataclass(frozen=True)
class StatePrompt:
    """What a seat is shown at one information state, and the reply of each legal action."""

    state: InfoState
    agent: str
    prompt_ids: np.ndarray
    replies: dict[int, np.ndarray]
    """Legal action id -> the token ids of its canonical reply."""


def state_prompt(game_id: str, seat: PolicySeat, state: InfoState) -> StatePrompt:
    """The prompt ids ``seat`` sees at ``state`` (built by ``PolicySeat.prompt``, as in play) and
    the canonical reply ids of each legal action. ``seat`` itself is left untouched."""
    env = games.make(game_id)
    asked = dataclasses.replace(seat, _conversation=None)
    target = env.possible_agents[state.player]

    def earlier_turn(agent: str, action: int) -> None:
        if agent == target and asked.role.memory == "conversation":
            prompt = asked.prompt(env, agent, env.observe(agent)["text"])
            assert prompt.ids is not None
            asked._conversation = np.concatenate([prompt.ids, reply_ids(asked, env, agent, action)])

    agent = reach(env, state, earlier_turn)
    prompt = asked.prompt(env, agent, env.observe(agent)["text"])
    assert prompt.ids is not None
    replies = {a: reply_ids(asked, env, agent, a) for a in state.legal_actions}
    return StatePrompt(state, agent, prompt.ids, replies)


def token_extensions(tokenizer: Any, token_ids: Iterable[int]) -> dict[int, list[int]]:
    """For each of ``token_ids``: every vocabulary token whose text begins with that token's
    text (itself included), e.g. ``>`` -> ``>``, ``>.``, ``>>``, ``>\n``."""
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    out = {}
    for token in set(int(t) for t in token_ids):
        text = vocab[token]
        out[token] = [i for i, v in enumerate(vocab) if v is not None and v.startswith(text)]
    return out


def read_seat(
    game_id: str,
    seat: PolicySeat,
    *,
    model: Any = None,
    temperature: float = 1.0,
    batch_size: int = 16,
) -> PolicyReading:
    """Read a language-model seat at every information state of ``game_id``: the seat plays
    every agent (:func:`read_seats` with one seat for all).

    ``model`` is the causal LM behind the seat: a transformers model that takes ``input_ids``,
    ``attention_mask``, ``position_ids``, a ``DynamicCache`` and ``logits_to_keep``, as
    ``HFPolicy`` drives it; by default the seat's policy's ``model`` (an ``HFPolicy``'s).
    """
    agents = games.make(game_id).possible_agents
    return read_seats(
        game_id,
        dict.fromkeys(agents, seat),
        models=None if model is None else dict.fromkeys(agents, model),
        temperature=temperature,
        batch_size=batch_size,
    )


def read_seats(
    game_id: str,
    seats: Mapping[str, PolicySeat],
    *,
    models: Mapping[str, Any] | None = None,
    temperature: float = 1.0,
    seat_temperatures: Mapping[str, float] | None = None,
    batch_size: int = 16,
) -> PolicyReading:
    """Read a game whose agents may play different policies: each agent's information states
    are read with its own seat in ``seats`` (agent -> seat; every agent of the game), scored by
    that seat's model (``models[agent]``, by default the seat's policy's ``model``) through the
    adapter the seat names, at ``temperature`` or, for an agent in ``seat_temperatures``, at
    its own (every temperature > 0; :func:`read_seat_at` reads greedy seats). The table is the
    union of every agent's rows, and its exploitability is that of the policies played
    together.

    Each seat's tokenizer must be the one in its ``chat``, which renders its prompts. A seat
    that acts by choice (:mod:`arena.play.choice`) is read as it plays: the softmax at
    ``temperature`` of its exact replies' sequence log-probabilities, with no invalid mass.
    Where a seat's ``params.adapter`` names none, the adapter its policy serves by default (a
    shared policy's LoRA served unmerged, :meth:`~arena.policies.hf.HFPolicy.serve_by_default`)
    plays, as the policy routes requests in play.
    """
    started = time.monotonic()
    agents = games.make(game_id).possible_agents
    missing = [a for a in agents if a not in seats]
    if missing:
        raise ValueError(f"{game_id}: no seat to read agent {missing[0]!r} with")
    temperatures = {a: float((seat_temperatures or {}).get(a, temperature)) for a in agents}
    unknown = [a for a in seat_temperatures or {} if a not in agents]
    if unknown:
        raise ValueError(f"{game_id} has no agent {unknown[0]!r} to read at a temperature")
    cold = [a for a, t in temperatures.items() if not t > 0]
    if cold:
        raise ValueError(
            f"{game_id}: agent {cold[0]!r} read at temperature {temperatures[cold[0]]}: a read "
            "needs a temperature > 0 (read_seat_at reads a greedy seat)"
        )
    models = dict(models or {})
    for agent, seat in seats.items():
        models.setdefault(agent, getattr(seat.policy, "model", None))
        if models[agent] is None:
            raise TypeError(
                f"{type(seat.policy).__name__} (agent {agent}) has no .model to score replies "
                "with; pass models="
            )
    prompts = [
        state_prompt(game_id, seats[agents[s.player]], s) for s in information_states(game_id)
    ]
    # one scoring pass per model, way of acting and temperature: a seat shared by every agent
    # scores every state in one batched pass, as one seat always did
    groups: dict[tuple[int, str, int, float], list[int]] = {}
    for i, p in enumerate(prompts):
        seat = seats[p.agent]
        key = (id(models[p.agent]), seat.act, id(seat.chat.tokenizer), temperatures[p.agent])
        groups.setdefault(key, []).append(i)
    scores: list[np.ndarray] = [np.empty(0)] * len(prompts)
    for (*_, t), members in groups.items():
        scored = _scores(prompts, members, seats, models, t, batch_size)
        for i, logprobs in zip(members, scored, strict=True):
            scores[i] = logprobs
    actions = openspiel_game(game_id).num_distinct_actions()
    table: dict[str, list[float]] = {}
    invalid: dict[str, float] = {}
    for p, logprobs in zip(prompts, scores, strict=True):
        choosing = seats[p.agent].act == CHOICE
        legal = p.state.legal_actions
        policy = np.exp(choice_logprobs(logprobs, temperatures[p.agent] if choosing else 1.0))
        row = [0.0] * actions
        for action, w in zip(legal, policy, strict=True):
            row[action] = float(w)
        table[p.state.key] = row
        # a choice seat never replies outside its legal replies
        invalid[p.state.key] = (
            0.0 if choosing else float(np.clip(1.0 - np.exp(logprobs).sum(), 0.0, 1.0))
        )
    return PolicyReading(
        game_id=game_id,
        table=table,
        invalid_mass=float(np.mean(list(invalid.values()))),
        state_invalid_mass=invalid,
        temperature=temperature,
        seconds=time.monotonic() - started,
        seat_temperatures={a: t for a, t in temperatures.items() if t != temperature},
    )


def _scores(
    prompts: list[StatePrompt],
    members: list[int],
    seats: Mapping[str, PolicySeat],
    models: Mapping[str, Any],
    temperature: float,
    batch_size: int,
) -> list[np.ndarray]:
    """The replies' log-probabilities at ``prompts[members]``, whose seats share one model,
    tokenizer, way of acting and ``temperature``."""
    group = [prompts[i] for i in members]
    seat = seats[group[0].agent]
    choosing = seat.act == CHOICE
    items = [(p.prompt_ids, [p.replies[a] for a in p.state.legal_actions]) for p in group]
    lasts = [reply[-1] for _, replies in items for reply in replies]
    # torch only here: the trainer imports this module at every start, and reads only at evals
    from arena.policies.scoring import continuation_sums

    def adapter(agent: str) -> str | None:
        # where a seat names no adapter, its policy plays its default one (a shared policy's
        # LoRA served unmerged), as it routes every request that names none
        named = seats[agent].params.adapter
        return named or getattr(seats[agent].policy, "default_adapter", None)

    return continuation_sums(
        models[group[0].agent],
        items,
        # a choice seat's policy: softmax(S / T) of the exact replies' T = 1 log-probabilities
        temperature=1.0 if choosing else temperature,
        batch_size=batch_size,
        extensions=None if choosing else token_extensions(seat.chat.tokenizer, lasts),
        adapters=[adapter(p.agent) for p in group],
    )


def greedy(table: dict[str, list[float]]) -> dict[str, list[float]]:
    """All of each state's mass on its most likely action (ties split evenly): the policy a
    greedy (temperature 0) seat plays, from a reading at any positive temperature."""
    out = {}
    for state, row in table.items():
        best = max(row)
        winners = [i for i, p in enumerate(row) if p == best and p > 0]
        out[state] = [1.0 / len(winners) if i in winners else 0.0 for i in range(len(row))]
    return out


def read_seat_at(
    game_id: str,
    seat: PolicySeat | Mapping[str, PolicySeat],
    *,
    model: Any = None,
    temperature: float,
    seat_temperatures: Mapping[str, float] | None = None,
    batch_size: int = 16,
) -> PolicyReading:
    """:func:`read_seat` (or, given a seat per agent, :func:`read_seats`) at the temperature
    the seats play at, 0 (greedy) included: ``temperature``, or, for an agent in
    ``seat_temperatures``, its own (a run's seats on policies that sample at temperatures of
    their own). A greedy seat is read at temperature 1 and its rows made :func:`greedy` (the
    most likely legal reply as a whole, which token-by-token greedy decoding approximates); the
    invalid mass stays that of the temperature-1 read. The reading's ``temperature`` and
    ``seat_temperatures`` are the ones asked."""
    asked = {a: float(t) for a, t in (seat_temperatures or {}).items() if t != temperature}
    agents = games.make(game_id).possible_agents
    models: dict[str, Any] | None = None
    if isinstance(seat, PolicySeat):
        seats = dict.fromkeys(agents, seat)
        models = None if model is None else dict.fromkeys(agents, model)
    elif model is not None:
        raise TypeError("read_seat_at: with a seat per agent, each seat's policy scores")
    else:
        seats = dict(seat)

    def read(t: float, own: dict[str, float]) -> PolicyReading:
        return read_seats(
            game_id,
            seats,
            models=models,
            temperature=t,
            seat_temperatures=own,
            batch_size=batch_size,
        )

    greedy_agents = {a for a in agents if asked.get(a, temperature) == 0}
    if not greedy_agents:
        return read(temperature, asked)
    reading = read(temperature or 1.0, {a: t or 1.0 for a, t in asked.items()})
    of_greedy = {s.key for s in information_states(game_id) if agents[s.player] in greedy_agents}
    made = greedy({k: row for k, row in reading.table.items() if k in of_greedy})
    return dataclasses.replace(
        reading,
        table={k: made.get(k, row) for k, row in reading.table.items()},
        exploitability=float("nan"),
        temperature=temperature,
        seat_temperatures=asked,
    )


def read_policy(
    game_id: str,
    source: Bot | BotSeat | PolicySeat,
    *,
    model: Any = None,
    temperature: float = 1.0,
    batch_size: int = 16,
) -> PolicyReading:
    """Read any seat filler: a tabular bot's table, the random bot's uniform policy, or a
    language-model seat's reply distribution (:func:`read_seat`)."""
    if isinstance(source, PolicySeat):
        return read_seat(
            game_id, source, model=model, temperature=temperature, batch_size=batch_size
        )
    started = time.monotonic()
    bot = source.bot if isinstance(source, BotSeat) else source
    table = bot_table(game_id, bot)
    zero = dict.fromkeys(table, 0.0)
    return PolicyReading(
        game_id, table, state_invalid_mass=zero, seconds=time.monotonic() - started
    )
