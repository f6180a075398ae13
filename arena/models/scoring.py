"""The policy over a turn's legal replies, from their tokens' log-probabilities: pure torch.

A turn played by choice (``arena/play/choice.py``) has legal replies a = 1..n, each a few tokens
scored after the prompt. Every place that turns token log-probabilities into that policy uses
the functions here: the learner (``trainers/choice.py``, ``trainers/per_state.py``), on a
micro-batch's flat tokens with gradients, and the exact policy reader
(``arena/eval/policy_reader.py``, through :func:`arena.policies.scoring.continuation_sums`)::

    S_a        = sum of reply a's token log-probabilities                  (reply_sums)
    log pi(a)  = S_a / T - logsumexp_b(S_b / T)  over the turn's replies   (legal_log_softmax)
    entropy    = -sum_a pi(a) log pi(a)

Replies are given flat: ``reply_of_token[i]`` is the reply token ``i`` belongs to, and
``reply_turn[a]`` the turn reply ``a`` belongs to, so one call serves any number of turns.
"""

from __future__ import annotations

import torch


def reply_sums(
    token_logprobs: torch.Tensor, reply_of_token: torch.Tensor, replies: int
) -> torch.Tensor:
    """``[replies]`` S_a: the sum of each reply's token log-probabilities (``[M]``, with
    ``reply_of_token[i]`` the reply of token ``i``), in ``token_logprobs``' dtype."""
    return token_logprobs.new_zeros(replies).index_add(0, reply_of_token, token_logprobs)


def legal_log_softmax(
    scores: torch.Tensor, turn: torch.Tensor, turns: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``log softmax`` of ``scores`` within each turn (``turn[a]`` is reply a's turn), and each
    turn's entropy."""
    top = scores.new_full((turns,), float("-inf")).scatter_reduce(
        0, turn, scores.detach(), "amax", include_self=True
    )
    shifted = scores - top[turn]
    log_z = torch.log(scores.new_zeros(turns).index_add(0, turn, shifted.exp()))
    log_pi = shifted - log_z[turn]
    entropy = -scores.new_zeros(turns).index_add(0, turn, log_pi.exp() * log_pi)
    return log_pi, entropy


def reply_logprobs(
    token_logprobs: torch.Tensor,
    reply_of_token: torch.Tensor,
    reply_turn: torch.Tensor,
    turns: int,
    temperature: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[R]`` log pi of every legal reply (``reply_turn[a]`` says whose turn), under the policy
    ``softmax(S / temperature)`` over each turn's replies, and each turn's ``[turns]`` entropy.
    ``token_logprobs`` are the replies' tokens only, ``reply_of_token`` their replies;
    ``temperature`` may be one per reply (``[R]``)."""
    sums = reply_sums(token_logprobs, reply_of_token, len(reply_turn))
    return legal_log_softmax(sums / temperature, reply_turn, turns)
