"""The loss elements of a micro-batch: generated tokens as they are, choice turns reduced to
the log-probability of the played reply under the policy over the legal replies.

For a choice turn with legal replies a = 1..n (``arena/play/choice.py``)::

    S_a        = sum of log softmax(logits)[token] over reply a's tokens        (T = 1)
    log pi(a)  = S_a / T - logsumexp_b(S_b / T)                                  T = loss.temperature
    element    = log pi(played reply),   entropy = -sum_a pi(a) log pi(a)

so the PPO ratio, the truncated importance weight against the sampler's recorded
``choice_logprob``, the KL to a reference and the entropy bonus (trainers/losses.py) all act on
the legal-normalized distribution, and the gradient reaches every legal reply's tokens: with
ratio 1, d(-A log pi(k)) / dS_a = -A (1[a = k] - pi(a)) / T. The arithmetic is
``arena/models/scoring.py``'s, which the exact policy reader shares.
"""

from __future__ import annotations

import torch

from arena.models.scoring import reply_logprobs
from trainers.microbatch import MicroBatch


def element_logprobs(
    token_logprobs: torch.Tensor,
    token_entropy: torch.Tensor,
    mb: MicroBatch,
    temperature: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[N]`` logprobs and entropies of ``mb``'s loss elements from its ``[M]`` scored tokens;
    ``temperature`` is every choice turn's, or each one's (``[C]``)."""
    logprobs = token_logprobs[mb.generated]
    entropy = token_entropy[mb.generated]
    if mb.chosen_reply.numel() == 0:
        return logprobs, entropy
    log_pi, turn_entropy = legal_policy(token_logprobs, mb, temperature)
    return (
        torch.cat([logprobs, log_pi[mb.chosen_reply]]),
        torch.cat([entropy, turn_entropy]),
    )


def legal_policy(
    token_logprobs: torch.Tensor, mb: MicroBatch, temperature: float | torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[R]`` log pi of every legal reply of ``mb``'s choice turns (``mb.reply_turn`` says
    whose), and each turn's entropy: :func:`arena.models.scoring.reply_logprobs` on ``mb``'s
    reply tokens (``token_logprobs`` are all ``[M]`` scored tokens); ``temperature`` is every
    turn's, or each one's (``[C]``)."""
    if isinstance(temperature, torch.Tensor):
        temperature = temperature[mb.reply_turn]  # each reply at its turn's
    return reply_logprobs(
        token_logprobs[mb.reply_tokens],
        mb.reply_of_token,
        mb.reply_turn,
        len(mb.chosen_reply),
        temperature,
    )
