"""The policy over a turn's legal replies from their tokens' log-probabilities
(arena/models/scoring.py), by hand: the arithmetic the learner and the policy reader share."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from arena.models.scoring import legal_log_softmax, reply_logprobs, reply_sums


def test_reply_sums_add_each_replys_tokens() -> None:
    tokens = torch.tensor([-1.0, -0.5, -2.0, -0.25, -0.25, -3.0])
    # replies 0: tokens 0, 1; 1: token 2; 2: tokens 3, 4, 5
    owner = torch.tensor([0, 0, 1, 2, 2, 2])
    assert reply_sums(tokens, owner, 3).tolist() == [-1.5, -2.0, -3.5]


def test_reply_logprobs_are_the_softmax_of_the_sums_within_each_turn() -> None:
    tokens = torch.tensor([-1.0, -0.5, -2.0, -0.25, -0.25, -3.0], dtype=torch.float64)
    owner = torch.tensor([0, 0, 1, 2, 2, 2])
    turn = torch.tensor([0, 0, 1])  # replies 0 and 1 are one turn's, reply 2 another's
    log_pi, entropy = reply_logprobs(tokens, owner, turn, 2, temperature=0.5)
    z = math.exp(-1.5 / 0.5) + math.exp(-2.0 / 0.5)
    want = [-1.5 / 0.5 - math.log(z), -2.0 / 0.5 - math.log(z), 0.0]
    assert log_pi.tolist() == pytest.approx(want, abs=1e-12)
    p = np.exp(want[:2])
    assert entropy.tolist() == pytest.approx([-(p * np.log(p)).sum(), 0.0], abs=1e-12)
    same, _ = legal_log_softmax(reply_sums(tokens, owner, 3) / 0.5, turn, 2)
    assert torch.equal(log_pi, same)


def test_the_gradient_reaches_every_legal_reply() -> None:
    tokens = torch.tensor([-1.0, -2.0], requires_grad=True)
    log_pi, _ = reply_logprobs(tokens, torch.tensor([0, 1]), torch.tensor([0, 0]), 1, 1.0)
    log_pi[0].backward()
    p0 = 1 / (1 + math.exp(-1.0))
    assert tokens.grad.tolist() == pytest.approx([1 - p0, -(1 - p0)], abs=1e-6)
