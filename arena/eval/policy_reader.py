"""Read a seat's whole policy, one information state at a time, and measure its exploitability.

Exploitability (:mod:`arena.eval.exploitability`) needs the policy as a table over every
information state. A reference bot with a table hands it over; the random bot is uniform. A
language-model seat has no table: its policy is the distribution of its replies. This module asks
the seat at every information state, exactly as play would (the env is put into the state with
:func:`~arena.eval.exploitability.reach`, and the prompt ids come from
:meth:`PolicySeat.prompt <arena.play.episode.PolicySeat.prompt>` on that env's observation,
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

The caller loads the model: ``arena.eval`` may not import ``arena.models`` (tests/test_layers.py),
so :func:`read_seat` takes the seat's policy model (``HFPolicy.model`` by default) or ``model=``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

import games
from arena.eval.exploitability import (
    InfoState,
    bot_table,
    exploitability,
    information_states,
    openspiel_game,
    reach,
)
from arena.play.episode import BotSeat, PolicySeat
from games.bots.base import Bot
from games.text_env import TextGame


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
    seconds: float = 0.0
    """Wall time of the read."""

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


def reply_ids(seat: PolicySeat, env: TextGame, agent: str, action: int) -> np.ndarray:
    """The token ids of the reply that plays ``action``: the action text in the role's output
    format, without the prefilled prefix (already in the prompt), closing tag included."""
    text = seat.role.output.wrap(env.action_to_text(agent, action))
    prefix = seat.role.assistant_prefix()
    if not text.startswith(prefix):
        raise ValueError(f"the role prefills {prefix!r} but its replies look like {text!r}")
    return seat.chat.encode_text(text[len(prefix) :])


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


@torch.inference_mode()
def reply_logprobs(
    model: Any,
    items: Sequence[tuple[np.ndarray, Sequence[np.ndarray]]],
    *,
    temperature: float = 1.0,
    batch_size: int = 16,
    extensions: Mapping[int, Sequence[int]] | None = None,
) -> list[np.ndarray]:
    """For each (prompt ids, [reply ids, ...]): the sum of each reply's token log-probabilities
    after the prompt, under ``softmax(logits / temperature)`` (teacher forcing). With
    ``extensions``, a reply's last token ``t`` counts as any of ``extensions[t]`` (the tokens
    that extend it, ``t`` included: :func:`token_extensions`): its log-probability is the
    log of their summed probability.

    Each prompt runs once: a batch of ``batch_size`` prompts, left-padded, fills a KV cache, which
    is then repeated for each of a prompt's replies; the replies, right-padded, run on top of it.
    A prompt is far longer than a reply, so this costs about one forward pass per state rather
    than one per action, and only the reply columns' logits are ever computed.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if any(len(prompt) == 0 or any(len(r) == 0 for r in replies) for prompt, replies in items):
        raise ValueError("every prompt and reply needs at least one token")
    device = next(model.parameters()).device
    out: list[np.ndarray] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        width = max(len(prompt) for prompt, _ in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, (prompt, _) in enumerate(chunk):
            ids[row, width - len(prompt) :] = torch.as_tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=model.config)
        first = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        # one row per (prompt, reply): the prompt's cache, then the reply right-padded
        owner = [row for row, (_, replies) in enumerate(chunk) for _ in replies]
        flat = [reply for _, replies in chunk for reply in replies]
        index = torch.tensor(owner, dtype=torch.long)
        cache.batch_select_indices(index.to(device))
        length = max(len(reply) for reply in flat)
        reply_ids = torch.zeros((len(flat), length), dtype=torch.long)
        reply_mask = torch.zeros((len(flat), length), dtype=torch.long)
        for row, reply in enumerate(flat):
            reply_ids[row, : len(reply)] = torch.as_tensor(reply, dtype=torch.long)
            reply_mask[row, : len(reply)] = 1
        after = positions[index, -1:] + 1 + torch.arange(length)
        rest = model(
            input_ids=reply_ids.to(device),
            attention_mask=torch.cat([mask[index], reply_mask], dim=1).to(device),
            position_ids=after.to(device),
            past_key_values=cache,
            use_cache=True,
        ).logits
        # reply token t is predicted by the prompt's last logits (t = 0) or reply column t - 1
        logits = torch.cat([first[index.to(device)][:, None], rest[:, :-1]], dim=1).float()
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
        token_lp = logprobs.gather(-1, reply_ids.to(device)[..., None])[..., 0]
        if extensions:
            for row, reply in enumerate(flat):
                last = int(reply[-1])
                if last in extensions:
                    alternatives = torch.as_tensor(list(extensions[last]), device=device)
                    at = len(reply) - 1
                    token_lp[row, at] = torch.logsumexp(logprobs[row, at, alternatives], -1)
        sums = (token_lp.cpu() * reply_mask).sum(-1).double().numpy()
        offset = 0
        for _, replies in chunk:
            out.append(sums[offset : offset + len(replies)].copy())
            offset += len(replies)
    return out


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
    """Read a language-model seat at every information state of ``game_id``.

    ``model`` is the causal LM behind the seat: a transformers model that takes ``input_ids``,
    ``attention_mask``, ``position_ids``, a ``DynamicCache`` and ``logits_to_keep``, as
    ``HFPolicy`` drives it; by default the seat's policy's ``model`` (an ``HFPolicy``'s). Its
    tokenizer must be the one in ``seat.chat``, which renders the prompts.
    """
    started = time.monotonic()
    model = model if model is not None else getattr(seat.policy, "model", None)
    if model is None:
        raise TypeError(
            f"{type(seat.policy).__name__} has no .model to score replies with; pass model="
        )
    prompts = [state_prompt(game_id, seat, s) for s in information_states(game_id)]
    items = [(p.prompt_ids, [p.replies[a] for a in p.state.legal_actions]) for p in prompts]
    lasts = [reply[-1] for _, replies in items for reply in replies]
    scores = reply_logprobs(
        model,
        items,
        temperature=temperature,
        batch_size=batch_size,
        extensions=token_extensions(seat.chat.tokenizer, lasts),
    )
    actions = openspiel_game(game_id).num_distinct_actions()
    table: dict[str, list[float]] = {}
    invalid: dict[str, float] = {}
    for p, logprobs in zip(prompts, scores, strict=True):
        legal = p.state.legal_actions
        top = logprobs.max()
        weights = np.exp(logprobs - top)
        row = [0.0] * actions
        for action, w in zip(legal, weights / weights.sum(), strict=True):
            row[action] = float(w)
        table[p.state.key] = row
        invalid[p.state.key] = float(np.clip(1.0 - np.exp(logprobs).sum(), 0.0, 1.0))
    return PolicyReading(
        game_id=game_id,
        table=table,
        invalid_mass=float(np.mean(list(invalid.values()))),
        state_invalid_mass=invalid,
        temperature=temperature,
        seconds=time.monotonic() - started,
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
    seat: PolicySeat,
    *,
    model: Any = None,
    temperature: float,
    batch_size: int = 16,
) -> PolicyReading:
    """:func:`read_seat` at the temperature the seat plays at, 0 (greedy) included: a greedy
    seat is read at temperature 1 and its table made :func:`greedy` (the most likely legal
    reply as a whole, which token-by-token greedy decoding approximates); the invalid mass
    stays that of the temperature-1 read. The reading's ``temperature`` is the one asked."""
    if temperature > 0:
        return read_seat(game_id, seat, model=model, temperature=temperature, batch_size=batch_size)
    reading = read_seat(game_id, seat, model=model, temperature=1.0, batch_size=batch_size)
    return dataclasses.replace(
        reading, table=greedy(reading.table), exploitability=float("nan"), temperature=0.0
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
