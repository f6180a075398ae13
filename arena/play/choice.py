"""Acting by choice: a policy over the legal replies instead of free generation.

A seat with ``act: choice`` (a game's section of the run config) does not write its reply. Its
game lists the legal actions; each becomes its *canonical reply*, the action text in the role's
output format less the part the role prefills into the prompt (``<answer>`` is prefilled, so
``bet`` becomes ``bet</answer>``). The policy scores every reply after the seat's prompt, the
prompt computed once (:meth:`Policy.score <arena.policies.base.Policy.score>`), and the seat
samples among them::

    S_a      = sum of the reply's token log-probabilities under log_softmax(logits)   (T = 1)
    pi(a)    = softmax_a(S_a / T)                                    T: the sampling temperature

so no invalid reply is possible, no update is spent on format, and what reinforcement learning
moves is the prior over actions the model starts from (GLAM, TWOSOME). At ``T = 0`` the seat
plays the likeliest reply, and records its probability at ``T = 1``. The learner recomputes
``S_a`` for every legal reply of the turn and trains on ``log pi(chosen)``: the ratio, the
entropy and the KL are those of this distribution (``trainers/choice.py``).

A game whose action space is free text has no list to choose from: a seat of it with ``act:
choice`` is a config error (:func:`arena.play.acting.check_act`).
"""

from __future__ import annotations

import numpy as np

from arena.play.seats import (
    EpisodeError,
    PolicySeat,
    record_turn,
    request_seed,
    turn_error,
)
from arena.policies.types import ContextOverflow
from arena.records import Turn
from games.text_env import TextGame


def reply_ids(seat: PolicySeat, env: TextGame, agent: str, action: int) -> np.ndarray:
    """The token ids of the reply that plays ``action``: the action text in the seat's role's
    output format, without the prefilled prefix (already in the prompt), closing tag included."""
    role, chat = seat.role, seat.chat
    text = role.output.wrap(env.action_to_text(agent, action))
    prefix = role.assistant_prefix()
    if not text.startswith(prefix):
        raise ValueError(f"the role prefills {prefix!r} but its replies look like {text!r}")
    return chat.encode_text(text[len(prefix) :])


def choice_logprobs(sums: np.ndarray, temperature: float) -> np.ndarray:
    """``log softmax(sums / T)`` over the legal replies (T = 1 when greedy, ``T = 0``)."""
    scaled = np.asarray(sums, dtype=np.float64) / (temperature if temperature > 0 else 1.0)
    top = scaled.max()
    return scaled - (top + np.log(np.exp(scaled - top).sum()))


def pick(logprobs: np.ndarray, temperature: float, seed: int) -> int:
    """The chosen reply's index: a draw from ``exp(logprobs)`` with the request's own seed, or
    the likeliest (the first of equals) when greedy."""
    if temperature == 0:
        return int(np.argmax(logprobs))
    probs = np.exp(logprobs - logprobs.max())
    return int(np.random.default_rng(seed).choice(len(probs), p=probs / probs.sum()))


async def choose_turn(
    env: TextGame,
    game_id: str,
    episode_id: str,
    seat: PolicySeat,
    agent: str,
    observation: str,
    turns: list[Turn],
) -> Turn:
    """One turn by choice: score every legal reply, draw one, play its action, record it.

    A state with no legal action (a free-text game's; a finite game's empty list is its bug,
    which ``legal_actions`` raises, failing the episode) is stepped with an empty reply, which
    the game rejects (its retry and forfeit rule then apply); a legal-action list that changed between scoring and
    stepping is recorded as a turn error and not trained on."""
    index = len(turns)
    legal = list(env.legal_actions(agent))
    if not legal:
        env.step_text("")
        turn = record_turn(episode_id, index, game_id, agent, seat.role.name, "", None, env)
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
    return record_turn(
        episode_id,
        index,
        game_id,
        agent,
        seat.role.name,
        prefix + text,
        action,
        env,
        prompt_ids=scoring.prompt_ids,
        response_ids=replies[chosen],
        response_logprobs=scoring.logprobs[chosen],
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
