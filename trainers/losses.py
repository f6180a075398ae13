"""The policy loss, term by term, on flat vectors over the N trained tokens.

Per token t of a turn with advantage A (the turn's, repeated on each of its tokens)::

    r_t    = exp(logp_t - logp_old_t)                     PPO ratio to the proximal policy
    pg_t   = max(-A r_t, -A clip(r_t, 1 - clip_low, 1 + clip_high))
    pg_t   = min(pg_t, -c A)            if A < 0          dual clip (c = dual_clip > 1)
    w_t    = min(exp(logp_old_t - logp_sampler_t), C)     truncated importance sampling, detached
                                                          (w_t = 1 with tis_cap None)
    kl_t   = exp(ref_t - logp_t) - (ref_t - logp_t) - 1   k3 estimator of KL(pi || ref)
    L_t    = u_i * (w_t * pg_t + beta * kl_t - eta * H_t)
    loss   = sum_t a_t * L_t

``logp_old`` is the learner's own logprob before this batch's first optimizer step (equal
to ``logp`` in the first step, so r = 1 there and PPO clipping acts from the second step on:
the next mini-batch or epoch, loss.minibatches and loss.ppo_epochs);
the sampler's logprobs enter only through w, which corrects the sampler/learner mismatch and
staleness (Yao et al., truncated IS). u_i is the turn's staleness weight. H is the entropy.

The aggregation weight a_t spreads the loss over the *global* batch (all micro-batches and
ranks), so gradient accumulation gives the same gradient as one big batch:

- ``token-mean``:           a_t = 1 / N_tokens
- ``seq-mean-token-mean``:  a_t = 1 / (len_i * N_turns)      len_i = tokens of t's turn
- ``constant``:             a_t = 1 / (C * N_turns)           C = norm_constant (Dr. GRPO)

N_tokens and N_turns include the turns the zero-advantage filter left out of the passes
(trainers/filters.py): their gradient is 0, and counting them keeps the filter a saving of
compute that changes no update.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainers.config import LossConfig


def aggregation_weights(
    seq_lengths: torch.Tensor,
    mode: str,
    num_tokens: float,
    num_seqs: float,
    constant: float | None = None,
) -> torch.Tensor:
    """a_t for each token (see the module docstring); counts are over the global batch."""
    if mode == "token-mean":
        return torch.full_like(seq_lengths, 1.0 / max(num_tokens, 1), dtype=torch.float32)
    if mode == "seq-mean-token-mean":
        return 1.0 / (seq_lengths.float() * max(num_seqs, 1))
    if mode == "constant":
        if constant is None or constant <= 0:
            raise ValueError("the constant aggregation needs a positive norm_constant")
        return torch.full_like(
            seq_lengths, 1.0 / (constant * max(num_seqs, 1)), dtype=torch.float32
        )
    raise ValueError(f"unknown aggregation {mode!r}")


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token clipped surrogate loss, and masks of where the clip and the dual clip acted."""
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    clip_active = clipped > unclipped
    dual_active = torch.zeros_like(clip_active)
    if dual_clip is not None:
        cap = -advantages * dual_clip
        dual_active = (advantages < 0) & (cap < loss)
        loss = torch.where(dual_active, cap, loss)
    return loss, clip_active, dual_active


def truncated_is_weights(
    old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, cap: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """min(pi_learner / pi_sampler, cap) per token, detached, and where the cap acted. With
    ``cap`` None there is no correction: every weight is 1 (not the uncapped ratio), as
    ``loss.tis_cap: null`` says."""
    ratio = torch.exp(old_logprobs.detach() - sampler_logprobs)
    if cap is None:
        return torch.ones_like(ratio), torch.zeros_like(ratio, dtype=torch.bool)
    return torch.clamp(ratio, max=cap), ratio > cap


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """exp(d) - d - 1 with d = ref - logp: non-negative, unbiased for KL(pi || ref) under pi."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


@dataclass
class LossOutput:
    loss: torch.Tensor
    """This micro-batch's share of the global loss (sum over micro-batches = the loss)."""
    sums: dict[str, torch.Tensor]
    """Detached sums for metrics: ``pg_loss`` and ``kl`` are aggregation-weighted shares (they
    add up over micro-batches); the others are plain token sums (divide by the token count)."""


def policy_loss(
    logprobs: torch.Tensor,
    entropy: torch.Tensor,
    old_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    agg_weights: torch.Tensor,
    config: LossConfig,
    ref_logprobs: torch.Tensor | None = None,
) -> LossOutput:
    """The loss of the module docstring for N tokens (all arguments are [N] vectors)."""
    pg, clip_active, dual_active = ppo_clip_loss(
        logprobs, old_logprobs, advantages, config.clip_low, config.clip_high, config.dual_clip
    )
    tis, tis_capped = truncated_is_weights(old_logprobs, sampler_logprobs, config.tis_cap)
    scale = weights * agg_weights
    pg_share = (scale * tis * pg).sum()
    loss = pg_share
    zero = logprobs.new_zeros(())
    kl_share, kl = zero, None
    if config.kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs reference logprobs")
        kl = k3_kl(logprobs, ref_logprobs)
        kl_share = (scale * kl).sum()
        loss = loss + config.kl_coef * kl_share
    entropy_share = (scale * entropy).sum()
    if config.entropy_coef > 0:
        loss = loss - config.entropy_coef * entropy_share
    mismatch = k3_kl(sampler_logprobs, old_logprobs.detach())  # KL(sampler || learner) estimate
    ratio = torch.exp(logprobs.detach() - old_logprobs.detach())
    sums = {
        "pg_loss": pg_share.detach(),
        "kl": kl_share.detach(),
        "entropy": entropy.detach().sum(),
        "clip_frac": clip_active.sum().float(),
        "dual_clip_frac": dual_active.sum().float(),
        "tis_capped_frac": tis_capped.sum().float(),
        "tis_weight": tis.sum(),
        "sampler_kl": mismatch.detach().sum(),
        "ratio": ratio.sum(),
        "ratio_dev": (ratio - 1.0).abs().sum(),
    }
    if kl is not None:
        sums["kl_token"] = kl.detach().sum()
    return LossOutput(loss=loss, sums=sums)
