"""The loss elements of a micro-batch: generated tokens as they are, choice turns reduced to
the log-probability of the played reply under the policy over the legal replies.

For a choice turn with legal replies a = 1..n (``arena/play/choice.py``)::

    S_a        = sum of log softmax(logits)[token] over reply a's tokens        (T = 1)
    log pi(a)  = S_a / T - logsumexp_b(S_b / T)                                  T = loss.temperature
    element    = log pi(played reply),   entropy = -sum_a pi(a) log pi(a)

so the PPO ratio, the truncated importance weight against the sampler's recorded
``choice_logprob``, the KL to a reference and the entropy bonus (trainers/losses.py) all act on
the legal-normalized distribution, and the gradient reaches every legal reply's tokens: with
ratio 1, d(-A log pi(k)) / dS_a = -A (1[a = k] - pi(a)) / T.
"""

from __future__ import annotations

import torch

from trainers.microbatch import MicroBatch


def element_logprobs(
    token_logprobs: torch.Tensor,
    token_entropy: torch.Tensor,
    mb: MicroBatch,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[N]`` logprobs and entropies of ``mb``'s loss elements from its ``[M]`` scored tokens."""
    logprobs = token_logprobs[mb.generated]
    entropy = token_entropy[mb.generated]
    if mb.chosen_reply.numel() == 0:
        return logprobs, entropy
    log_pi, turn_entropy = reply_logprobs(token_logprobs, mb, temperature)
    return (
        torch.cat([logprobs, log_pi[mb.chosen_reply]]),
        torch.cat([entropy, turn_entropy]),
    )


def reply_logprobs(
    token_logprobs: torch.Tensor, mb: MicroBatch, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[R]`` log pi of every legal reply of ``mb``'s choice turns (``mb.reply_turn`` says
    whose), and each turn's entropy."""
    sums = token_logprobs.new_zeros(len(mb.reply_turn)).index_add(
        0, mb.reply_of_token, token_logprobs[mb.reply_tokens]
    )
    return legal_log_softmax(sums / temperature, mb.reply_turn, len(mb.chosen_reply))


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
