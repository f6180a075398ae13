"""Next-token sampling for a batch whose rows may each have their own :class:`SamplingParams`.

The returned logprob of a sampled token is always under the raw distribution
(``log_softmax(logits)``, temperature 1, no truncation), as vLLM's default ``raw_logprobs``
mode does: that is the quantity a learner recomputes by teacher forcing and compares in its
importance ratio. Temperature, top-k and top-p only shape which token is drawn.
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
        """``logits`` is ``[rows, vocab]``; returns sampled ids and their raw logprobs."""
        logits = logits.float()
        raw = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
        sampled = [i for i, p in enumerate(self.params) if not p.greedy]
        if sampled:
            index = torch.tensor(sampled, device=logits.device)
            probs = self._probs(logits[index], [self.params[i] for i in sampled])
            tokens[index] = self._draw(probs, [self.generators[i] for i in sampled])
        return tokens, raw.gather(1, tokens[:, None]).squeeze(1)

    def _probs(self, logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
        temperature = torch.tensor([p.temperature for p in params], device=logits.device)
        logits = logits / temperature[:, None]
        top_k = torch.tensor([p.top_k for p in params], device=logits.device)
        top_p = torch.tensor([p.top_p for p in params], device=logits.device)
        if bool((top_k > 0).any()) or bool((top_p < 1).any()):
            ordered, order = logits.sort(dim=-1, descending=True)
            rank = torch.arange(logits.shape[-1], device=logits.device)[None, :]
            drop = (top_k[:, None] > 0) & (rank >= top_k[:, None])
            ordered = ordered.masked_fill(drop, float("-inf"))
            probs = ordered.softmax(dim=-1)
            # Drop a token once the mass before it already reaches top_p (the first always stays).
            drop |= (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
            logits = logits.scatter(1, order, ordered.masked_fill(drop, float("-inf")))
        return logits.softmax(dim=-1)

    def _draw(self, probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
        """Inverse-CDF sampling: one uniform draw per row from that row's generator, then a
        two-level search: over the cumulative masses of blocks of the vocabulary, then within
        the chosen block. (``torch.multinomial`` per row costs milliseconds over a 49k vocab,
        and a float64 cumsum over the whole vocab took 13% of a CPU decoding step.)"""
        draws = torch.empty(probs.shape[0], dtype=torch.float64)
        for i, generator in enumerate(generators):
            draws[i] = torch.rand((), generator=generator or self.shared, dtype=torch.float64)
        rows, vocab = probs.shape
        blocks = torch.nn.functional.pad(probs, (0, -vocab % BLOCK)).view(rows, -1, BLOCK)
        block_cdf = blocks.sum(dim=-1, dtype=torch.float64).cumsum(dim=-1)
        target = draws.to(probs.device) * block_cdf[:, -1]
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
