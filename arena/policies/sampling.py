"""Next-token sampling for a batch whose rows may each have their own :class:`SamplingParams`.

The returned logprob of a sampled token is under the *tempered, untruncated* distribution:
``log_softmax(logits / T)[token]`` with the row's temperature ``T``, top-k and top-p ignored.

- Tempered, because that is (up to truncation) the distribution that drew the token: a learner
  that divides its logits by the same ``T`` (``trainers/logprobs.py``, ``loss.temperature``)
  then optimizes, and importance-weights against, the policy that actually sampled, as verl
  does. Raw (T = 1) logprobs would make the ratios compare like with like but leave the
  samples from another distribution than the one whose gradient is taken.
- Untruncated, because that is what the learner can recompute by teacher forcing: it does not
  know which tokens a top-k/top-p cut left out at each step. With top-k/top-p on, the sampled
  token's logprob under the truncated distribution is higher by ``-log(kept mass)``; the
  shipped training configs leave both off.
- A greedy row (T = 0) reports the T = 1 logprob of its argmax: there is no distribution at
  T = 0, and greedy decoding serves evaluation, whose logprobs are never trained on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from arena.policies.types import SamplingParams


class BatchSampler:
    """Samples one token per row; rows with a seed draw from their own generator."""

    def __init__(self, params: Sequence[SamplingParams], generator: torch.Generator) -> None:
        """``generator`` (a CPU one) serves rows without a seed; seeded rows get their own."""
        self.params = list(params)
        self.shared = generator
        self.generators = [
            torch.Generator().manual_seed(p.seed) if p.seed is not None else None
            for p in self.params
        ]

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these rows (as the batch drops finished requests)."""
        keep = rows.tolist()
        self.params = [self.params[i] for i in keep]
        self.generators = [self.generators[i] for i in keep]

    @torch.no_grad()
    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``logits`` is ``[rows, vocab]``; returns sampled ids and their logprobs under
        ``log_softmax(logits / T)`` (T = 1 for greedy rows; see the module docstring)."""
        logits = logits.float()
        tokens = logits.argmax(dim=-1)
        temperature = [p.temperature if not p.greedy else 1.0 for p in self.params]
        if any(t != 1.0 for t in temperature):
            logits = logits / torch.tensor(temperature, device=logits.device)[:, None]
        sampled = [i for i, p in enumerate(self.params) if not p.greedy]
        if sampled:
            index = torch.tensor(sampled, device=logits.device)
            probs = self._probs(logits[index], [self.params[i] for i in sampled])
            tokens[index] = self._draw(probs, [self.generators[i] for i in sampled])
        chosen = logits.gather(1, tokens[:, None]).squeeze(1)
        # The learner's formula (trainers/logprobs.py), so both sides round alike.
        return tokens, chosen - torch.logsumexp(logits, dim=-1)

    def _probs(self, logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
        """Sampling probabilities from already tempered ``logits``: top-k, top-p, softmax."""
        top_k = torch.tensor([p.top_k for p in params], device=logits.device)
        top_p = torch.tensor([p.top_p for p in params], device=logits.device)
        if bool((top_k > 0).any()) or bool((top_p < 1).any()):
            return truncated_probs(logits, top_k, top_p)
        return logits.softmax(dim=-1)

    def _draw(self, probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
        """One uniform draw per row from that row's generator, then :func:`inverse_cdf`."""
        draws = torch.empty(probs.shape[0], dtype=torch.float64)
        for i, generator in enumerate(generators):
            draws[i] = torch.rand((), generator=generator or self.shared, dtype=torch.float64)
        return inverse_cdf(probs, draws.to(probs.device))


def truncated_probs(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Probabilities from tempered ``logits`` ``[rows, vocab]`` cut to each row's ``top_k``
    (0: no cut) and ``top_p`` (1: no cut), then renormalized. Device ops only: no host sync."""
    ordered, order = logits.sort(dim=-1, descending=True)
    rank = torch.arange(logits.shape[-1], device=logits.device)[None, :]
    drop = (top_k[:, None] > 0) & (rank >= top_k[:, None])
    ordered = ordered.masked_fill(drop, float("-inf"))
    probs = ordered.softmax(dim=-1)
    # Drop a token once the mass before it already reaches top_p (the first always stays).
    drop |= (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
    logits = logits.scatter(1, order, ordered.masked_fill(drop, float("-inf")))
    return logits.softmax(dim=-1)


def inverse_cdf(probs: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """The token of each row of ``probs`` whose cumulative mass first exceeds that row's
    uniform ``draws`` (float64, on ``probs``' device): a two-level search, over the cumulative
    masses of blocks of the vocabulary, then within the chosen block. (``torch.multinomial``
    per row costs milliseconds over a 49k vocab, and a float64 cumsum over the whole vocab took
    13% of a CPU decoding step.) Device ops only: no host sync."""
    rows, vocab = probs.shape
    blocks = torch.nn.functional.pad(probs, (0, -vocab % BLOCK)).view(rows, -1, BLOCK)
    block_cdf = blocks.sum(dim=-1, dtype=torch.float64).cumsum(dim=-1)
    target = draws * block_cdf[:, -1]
    # right=True: the first block (then token) whose cumulative mass exceeds the target; a
    # token of zero probability adds no mass, so it can never be that token.
    block = torch.searchsorted(block_cdf, target[:, None], right=True).squeeze(1)
    block = block.clamp(max=block_cdf.shape[1] - 1)
    before = torch.where(
        block > 0, block_cdf.gather(1, (block - 1).clamp(min=0)[:, None]).squeeze(1), 0.0
    )
    chosen = blocks[torch.arange(rows, device=probs.device), block]
    inner = torch.searchsorted(
        chosen.double().cumsum(dim=-1), (target - before)[:, None], right=True
    ).squeeze(1)
    # Rounding between the block sums and the in-block cumsum can overshoot the block's
    # end; the last token of positive probability is then the one meant.
    last = BLOCK - 1 - (chosen > 0).flip(-1).int().argmax(dim=-1)
    return block * BLOCK + torch.minimum(inner, last)


BLOCK = 256
"""Vocabulary block of the two-level inverse-CDF search (49152 = 192 blocks for SmolLM2)."""
