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
choice`` is a config error (:func:`check_choice_game`).
"""

from __future__ import annotations

import numpy as np

from arena.core.errors import ConfigError
from games.text_env import TextGame

ACTS = ("generate", "choice")
"""How a policy seat acts: ``generate`` writes free text that its role reads; ``choice`` picks
one of the legal replies by their scores."""


def reply_ids(seat: object, env: TextGame, agent: str, action: int) -> np.ndarray:
    """The token ids of the reply that plays ``action``: the action text in the seat's role's
    output format, without the prefilled prefix (already in the prompt), closing tag included.
    ``seat`` is a :class:`~arena.play.episode.PolicySeat`."""
    role, chat = seat.role, seat.chat  # type: ignore[attr-defined]
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


def check_choice_game(game_id: str, env: TextGame, seats: list[str]) -> None:
    """Refuse ``act: choice`` for a game whose ``seats`` cannot list their legal replies."""
    if env.free_text:
        raise ConfigError(
            f"games.{game_id}: act: choice needs a game that lists its legal actions, but "
            f"{game_id} takes free text (seats {', '.join(seats)}); use act: generate"
        )
