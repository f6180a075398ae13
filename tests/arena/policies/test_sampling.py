"""The batch sampler: frequencies, truncation, seeds, and tempered untruncated logprobs.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_sampling.py``.
"""

from __future__ import annotations

import torch

from arena.policies.sampling import BatchSampler
from arena.policies.types import SamplingParams

PROBS = torch.tensor([0.1, 0.0, 0.6, 0.3])


def sample(params: list[SamplingParams], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    logits = PROBS.log().repeat(len(params), 1)
    return BatchSampler(params, torch.Generator().manual_seed(seed))(logits)


def tempered(temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) of the test distribution, over the whole vocabulary."""
    return torch.log_softmax(PROBS.log() / temperature, dim=-1)


def test_frequencies_follow_the_distribution_and_logprobs_are_its_own() -> None:
    for params in ([SamplingParams()] * 20_000, [SamplingParams(seed=i) for i in range(20_000)]):
        tokens, logprobs = sample(params)
        freq = torch.bincount(tokens, minlength=4).double() / len(params)
        assert freq[1] == 0  # zero probability: never drawn
        assert torch.allclose(freq, PROBS.double(), atol=0.015)  # ~4 standard errors
        assert torch.allclose(logprobs, PROBS.log()[tokens])


def test_temperature_top_k_and_top_p() -> None:
    assert set(sample([SamplingParams(temperature=0)] * 50)[0].tolist()) == {2}
    assert set(sample([SamplingParams(top_k=1)] * 50)[0].tolist()) == {2}
    assert set(sample([SamplingParams(top_k=2)] * 500)[0].tolist()) == {2, 3}
    assert set(sample([SamplingParams(top_p=0.55)] * 50)[0].tolist()) == {2}
    assert set(sample([SamplingParams(top_p=0.85)] * 500)[0].tolist()) == {2, 3}
    cold = torch.bincount(sample([SamplingParams(temperature=0.25)] * 2000)[0], minlength=4)
    assert 0.91 * 2000 < cold[2] < 0.97 * 2000  # 0.6**4 / (0.1**4 + 0.6**4 + 0.3**4) = 0.94


def test_logprobs_are_tempered_and_untruncated() -> None:
    """The sampled token's log_softmax(logits / T): the distribution that drew it, before the
    top-k/top-p cut (which a learner cannot recompute); greedy rows report T = 1."""
    for params in (
        SamplingParams(temperature=0.25),
        SamplingParams(temperature=0.7, top_k=2),
        SamplingParams(temperature=1.5, top_p=0.85),
    ):
        tokens, logprobs = sample([params] * 200)
        assert len(set(tokens.tolist())) > 1  # a sample, not the argmax every time
        assert torch.allclose(logprobs, tempered(params.temperature)[tokens])
        assert not torch.allclose(logprobs, PROBS.log()[tokens], atol=1e-3)
    mixed = [
        p for i in range(50) for p in (SamplingParams(temperature=0), SamplingParams(0.5, seed=i))
    ]
    tokens, logprobs = sample(mixed)
    assert torch.allclose(logprobs[0::2], PROBS.log()[2].expand(50))  # greedy: the argmax at T = 1
    assert torch.allclose(logprobs[1::2], tempered(0.5)[tokens[1::2]])


def test_seeded_rows_do_not_depend_on_their_batch() -> None:
    alone = sample([SamplingParams(seed=7)])[0]
    mixed = sample(
        [SamplingParams(), SamplingParams(seed=7), SamplingParams(temperature=0)], seed=3
    )[0]
    assert alone[0] == mixed[1]


def test_a_large_vocabulary_is_searched_across_blocks() -> None:
    # Mass on both sides of block edges (256), on the last (partial) block, and zeros between.
    probs = torch.zeros(1000)
    probs[[0, 255, 256, 511, 700, 999]] = torch.tensor([0.05, 0.2, 0.15, 0.1, 0.3, 0.2])
    n = 30_000
    tokens, _ = BatchSampler([SamplingParams()] * n, torch.Generator().manual_seed(1))(
        probs.log().repeat(n, 1)
    )
    freq = torch.bincount(tokens, minlength=1000).double() / n
    assert set(tokens.unique().tolist()) == {0, 255, 256, 511, 700, 999}
    assert torch.allclose(freq, probs.double(), atol=0.012)  # ~4.5 standard errors at 0.3
