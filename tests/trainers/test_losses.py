"""Every loss term against a hand computation on small tensors (arithmetic in comments).

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_losses.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

from trainers.config import LossConfig
from trainers.logprobs import token_logprobs
from trainers.losses import (
    aggregation_weights,
    k3_kl,
    policy_loss,
    ppo_clip_loss,
    truncated_is_weights,
)


def t(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_ppo_clip_and_dual_clip_by_hand() -> None:
    # clip_low 0.2, clip_high 0.2, dual clip c = 3; old logprob 0, so ratio r = exp(logp):
    #  r    A    -A r   -A clip(r, .8, 1.2)  max     clip?  dual cap -cA  final  dual?
    #  1.5  +1   -1.5   -1.2                 -1.2    yes    (A > 0)       -1.2   no
    #  0.5  +1   -0.5   -0.8                 -0.5    no     (A > 0)       -0.5   no
    #  0.5  -1   +0.5   +0.8                 +0.8    yes    3             +0.8   no
    #  5.0  -1   +5.0   +1.2                 +5.0    no     3             +3.0   yes
    #  1.0  +2   -2.0   -2.0                 -2.0    no     (A > 0)       -2.0   no
    ratios = t([1.5, 0.5, 0.5, 5.0, 1.0])
    adv = t([1.0, 1.0, -1.0, -1.0, 2.0])
    loss, clipped, dual = ppo_clip_loss(
        ratios.log(), torch.zeros(5, dtype=torch.float64), adv, 0.2, 0.2, dual_clip=3.0
    )
    assert loss.tolist() == pytest.approx([-1.2, -0.5, 0.8, 3.0, -2.0])
    assert clipped.tolist() == [True, False, True, False, False]
    assert dual.tolist() == [False, False, False, True, False]
    # Without the dual clip the fourth token keeps +5.
    loss, _, dual = ppo_clip_loss(ratios.log(), torch.zeros(5, dtype=torch.float64), adv, 0.2, 0.2)
    assert loss[3].item() == pytest.approx(5.0)
    assert not dual.any()


def test_asymmetric_clip() -> None:
    # clip_low 0.1, clip_high 0.3: r = 1.4 with A = +1 is clipped to 1.3 -> -1.3;
    # r = 0.85 with A = -1 is clipped up to 0.9 -> +0.9 (max(0.85, 0.9)).
    loss, clipped, _ = ppo_clip_loss(t([1.4, 0.85]).log(), t([0.0, 0.0]), t([1.0, -1.0]), 0.1, 0.3)
    assert loss.tolist() == pytest.approx([-1.3, 0.9])
    assert clipped.tolist() == [True, True]


def test_truncated_importance_sampling_by_hand() -> None:
    # w = min(exp(old - sampler), C = 2): exp(0.5) = 1.648721, exp(1) = 2.718 -> 2, exp(-1) = 0.367879
    old = t([-1.0, -1.0, -2.0])
    sampler = t([-1.5, -2.0, -1.0])
    w, capped = truncated_is_weights(old, sampler, cap=2.0)
    assert w.tolist() == pytest.approx([1.648721, 2.0, 0.367879], abs=1e-6)
    assert capped.tolist() == [False, True, False]
    w, capped = truncated_is_weights(old, sampler, cap=None)
    assert w.tolist() == [1.0, 1.0, 1.0] and not capped.any()


def test_k3_kl_by_hand() -> None:
    # logp = ln 0.5, ref = ln 0.25: d = ref - logp = ln 0.5 = -0.693147
    #   k3 = exp(d) - d - 1 = 0.5 + 0.693147 - 1 = 0.193147; equal logprobs give 0.
    kl = k3_kl(t([math.log(0.5), -1.0]), t([math.log(0.25), -1.0]))
    assert kl.tolist() == pytest.approx([0.193147, 0.0], abs=1e-6)


def test_aggregations_by_hand() -> None:
    # Two turns: lengths 1 and 3, per-token losses [1 | 2, 4, 6].
    #   token-mean          = (1 + 2 + 4 + 6) / 4 = 3.25
    #   seq-mean-token-mean = (1/1 + 12/3) / 2 = (1 + 4) / 2 = 2.5
    #   constant (C = 4)    = (1 + 12) / (4 * 2) = 1.625
    losses = t([1.0, 2.0, 4.0, 6.0])
    lengths = t([1.0, 3.0, 3.0, 3.0])
    expect = {"token-mean": 3.25, "seq-mean-token-mean": 2.5, "constant": 1.625}
    for mode, value in expect.items():
        weights = aggregation_weights(lengths, mode, num_tokens=4, num_seqs=2, constant=4.0)
        assert (weights.double() * losses).sum().item() == pytest.approx(value)
    with pytest.raises(ValueError):
        aggregation_weights(lengths, "constant", 4, 2, None)


def test_aggregation_weights_split_over_micro_batches() -> None:
    # With the global counts, the shares of two micro-batches add up to the whole.
    losses, lengths = t([1.0, 2.0, 4.0, 6.0]), t([1.0, 3.0, 3.0, 3.0])
    for mode in ("token-mean", "seq-mean-token-mean", "constant"):
        whole = (aggregation_weights(lengths, mode, 4, 2, 4.0).double() * losses).sum()
        first = (aggregation_weights(lengths[:1], mode, 4, 2, 4.0).double() * losses[:1]).sum()
        second = (aggregation_weights(lengths[1:], mode, 4, 2, 4.0).double() * losses[1:]).sum()
        assert (first + second).item() == pytest.approx(whole.item())


def test_token_logprob_and_entropy_by_hand() -> None:
    # logits [0, ln 3] -> p = [0.25, 0.75]: logp(target 1) = ln 0.75 = -0.287682,
    #   H = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.346574 + 0.215762 = 0.562335
    # logits [0, 0] -> p = [0.5, 0.5]: logp(0) = -0.693147, H = ln 2 = 0.693147
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]])
    logp, entropy = token_logprobs(logits, torch.tensor([1, 0]))
    assert logp.tolist() == pytest.approx([-0.287682, -0.693147], abs=1e-6)
    assert entropy.tolist() == pytest.approx([0.562335, 0.693147], abs=1e-6)
    # Temperature 2 on logits [0, 2 ln 3] gives the same distribution as [0, ln 3].
    logp, entropy = token_logprobs(torch.tensor([[0.0, 2 * math.log(3.0)]]), torch.tensor([1]), 2.0)
    assert logp.item() == pytest.approx(-0.287682, abs=1e-6)
    assert entropy.item() == pytest.approx(0.562335, abs=1e-6)


def test_policy_loss_total_by_hand() -> None:
    # Two tokens, token-mean (a = 1/2), staleness weights u = [1, 0.5]:
    #   token 1: logp = old = -1 (r = 1), A = +1, sampler -1.5 -> w = exp(0.5) = 1.648721
    #            pg = -1; entropy 0.4; ref -1.2 -> k3: d = -0.2, exp(-0.2) + 0.2 - 1 = 0.018731
    #   token 2: logp = old = -2 (r = 1), A = -2, sampler -0.5 -> w = exp(-1.5) = 0.223130
    #            pg = +2; entropy 0.6; ref -2 -> k3 = 0
    #   pg share  = 1/2 * (1 * 1.648721 * -1) + 1/2 * (0.5 * 0.223130 * 2) = -0.824361 + 0.111565
    #             = -0.712796
    #   kl share  = 1/2 * (1 * 0.018731) + 0 = 0.009365
    #   ent share = 1/2 * (1 * 0.4) + 1/2 * (0.5 * 0.6) = 0.35
    #   loss = pg + 0.1 * kl - 0.01 * ent = -0.712796 + 0.000937 - 0.0035 = -0.715360
    config = LossConfig(kl_coef=0.1, entropy_coef=0.01, tis_cap=2.0)
    logp = t([-1.0, -2.0]).requires_grad_(True)
    out = policy_loss(
        logprobs=logp,
        entropy=t([0.4, 0.6]),
        old_logprobs=logp.detach(),
        sampler_logprobs=t([-1.5, -0.5]),
        advantages=t([1.0, -2.0]),
        weights=t([1.0, 0.5]),
        agg_weights=t([0.5, 0.5]),
        config=config,
        ref_logprobs=t([-1.2, -2.0]),
    )
    assert out.sums["pg_loss"].item() == pytest.approx(-0.712796, abs=1e-6)
    assert out.sums["kl"].item() == pytest.approx(0.009365, abs=1e-6)
    assert out.loss.item() == pytest.approx(-0.715360, abs=1e-6)
    # Gradient wrt logp at r = 1: d(pg)/d(logp) = -A * r = -A (unclipped), times u * w * a;
    #   d(k3)/d(logp) = 1 - exp(ref - logp):
    #   token 1: 0.5 * 1.648721 * -1 + 0.1 * 0.5 * (1 - exp(-0.2)) = -0.824361 + 0.009063 = -0.815297
    #   token 2: 0.5 * 0.5 * 0.223130 * 2 + 0.1 * 0.5 * 0.5 * 0 = 0.111565
    out.loss.backward()
    assert logp.grad.tolist() == pytest.approx([-0.815297, 0.111565], abs=1e-6)
    assert out.sums["clip_frac"].item() == 0.0
    assert out.sums["tis_capped_frac"].item() == 0.0


def test_kl_needs_reference() -> None:
    with pytest.raises(ValueError):
        policy_loss(
            t([-1.0]),
            t([0.1]),
            t([-1.0]),
            t([-1.0]),
            t([1.0]),
            t([1.0]),
            t([1.0]),
            LossConfig(kl_coef=0.1),
        )
