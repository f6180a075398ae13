"""One learner step's optimization: the turns of a batch in, optimizer steps on the policy out.

A step is ``loss.ppo_epochs`` passes over ``loss.minibatches`` mini-batches of the kept turns,
one optimizer step each, every one scored against the policy from before the first step (the
PPO clip then acts from the second mini-batch on; trainers/losses.py). Mini-batch 0's old
logprobs come from its own first pass, which runs before any step; the others get a no-grad
forward first. Turns are packed into micro-batches of ``batch.micro_batch_tokens`` whose
gradients accumulate; a non-finite loss or gradient skips the optimizer step (and the whole
update if no step was taken yet), keeping the weights.

Under ``torchrun`` every rank holds all the turns (rank 0 broadcast them), splits them alike
(a shuffle seeded by the run's seed and the step) and trains its shard of each mini-batch, so
all ranks take the same optimizer steps in lockstep; a rank that runs out of turns runs
zero-weight dummies, since FSDP2 gathers weights in every forward.

:class:`trainers.learner.Learner` owns the model, the optimizer and the step count, and calls
:meth:`PolicyUpdate.run` once per step.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from arena.models.lora import route
from trainers import distributed as ddist
from trainers.adapters import NamedAdapters
from trainers.batch import Sample, shard
from trainers.choice import element_logprobs
from trainers.config import LearnerConfig
from trainers.logprobs import TokenLogprobs
from trainers.losses import aggregation_weights, policy_loss
from trainers.microbatch import MicroBatch, pack
from trainers.optim import learning_rate, set_learning_rate
from trainers.precision import autocast_dtype

log = logging.getLogger("arena.learner")
# Loss metrics that are token sums (averaged per token and pass); the others are per step.
_PER_TOKEN = (
    "entropy",
    "clip_frac",
    "dual_clip_frac",
    "tis_capped_frac",
    "tis_weight",
    "sampler_kl",
    "ratio",
    "ratio_dev",
    "kl_token",
)


class _MiniBatch(NamedTuple):
    """One optimizer step's share of a batch on this rank: its micro-batches (dummies pad them
    to the busiest rank's count), how many hold turns, and the trained tokens of all ranks."""

    batches: list[MicroBatch]
    real: int
    tokens: int


class PolicyUpdate:
    """The optimizer steps of one learner step (see the module docstring)."""

    def __init__(
        self,
        config: LearnerConfig,
        model: torch.nn.Module,
        policy: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        reference: torch.nn.Module | None,
        dist: ddist.DistInfo,
        device: torch.device,
        pad_id: int,
        adapters: NamedAdapters | None = None,
    ) -> None:
        self.config = config
        self.model = model
        """The trained model (a peft model with LoRA)."""
        self.policy = policy
        """``model`` wrapped for logprobs (and DDP/FSDP2): what forwards go through."""
        self.optimizer = optimizer
        self.reference = reference
        """The frozen KL reference; None without KL, or with LoRA (adapters off instead)."""
        self.dist = dist
        self.device = device
        self.pad_id = pad_id
        self.adapters = adapters
        """Named policies' adapters (trainers/adapters.py), or None: the model itself trains."""

    def run(
        self,
        kept: list[Sample],
        step: int,
        counters: Counter[str],
        silent: Sequence[Sample] = (),
    ) -> dict[str, float]:
        """Train on ``kept`` at learner ``step``; its metrics, with ``tokens`` (the trained
        response tokens), ``signal_share`` and ``optimizer_steps``, or ``{"skipped": 1.0}``
        when the first optimizer step already met a non-finite loss or gradient (nothing
        moved; counted in ``counters["skipped_nonfinite"]``).

        ``silent`` are the turns the zero-advantage filter left out: they count in the loss's
        normalizer (tokens or turns, by ``loss.aggregation``) as if they had been trained on,
        since their policy gradient is 0. So the loss of a batch where 4 of 64 turns carry
        signal is the unfiltered one, 4/64 of the weight of a batch whose 64 turns all do
        (normalizing over the 4 alone gave them a full batch's weight, and made the steps with
        the least signal the noisiest). ``signal_share`` is the kept share of those tokens."""
        cfg = self.config
        start = time.perf_counter()
        silent_tokens = sum(s.loss_elements for s in silent)
        splits = self.split(len(kept), step)
        parts = [
            self._minibatch(
                [kept[i] for i in idx],
                silent_tokens * len(idx) / len(kept),
                len(silent) * len(idx) / len(kept),
            )
            for idx in splits
        ]
        self._old_logprobs(parts[1:])  # mini-batch 0's first pass (before any step) gives its own
        lr = learning_rate(step, cfg.optim)  # per learner step: see loss.minibatches
        set_learning_rate(self.optimizer, lr)
        totals: Counter[str] = Counter()
        steps = passes = 0
        for epoch, part in itertools.product(range(cfg.loss.ppo_epochs), parts):
            sums, finite = self._accumulate(part.batches, part.real)
            grad_norm, per_policy = self._clip_gradients()
            bad = not (finite and math.isfinite(grad_norm))
            if ddist.all_reduce_max(float(bad), self.dist, self.device) > 0:
                self.optimizer.zero_grad(set_to_none=True)
                counters["skipped_nonfinite"] += 1
                log.warning(
                    "non-finite loss or gradient at step %d (epoch %d, optimizer step %d): "
                    "update skipped, weights kept",
                    step,
                    epoch,
                    steps,
                )
                if steps == 0:
                    return {"skipped": 1.0}
                break  # earlier optimizer steps already moved the weights: the step still counts
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            steps += 1
            passes += part.tokens
            totals.update(sums)
            totals["grad_norm"] += grad_norm
            totals.update({f"grad_norm/{name}": norm for name, norm in per_policy.items()})
        elapsed = time.perf_counter() - start
        num_tokens = sum(part.tokens for part in parts)
        mine = sum(mb.num_input_tokens for part in parts for mb in part.batches[: part.real])
        tokens = ddist.all_reduce_sum({"in": float(mine)}, self.dist, self.device)["in"]
        metrics = _loss_metrics(totals, passes, steps)
        metrics.update(
            lr=lr,
            optimizer_steps=float(steps),
            tokens=float(num_tokens),
            signal_share=num_tokens / (num_tokens + silent_tokens) if num_tokens else 0.0,
            input_tokens=tokens,
            update_time=elapsed,
            tokens_per_s=tokens / elapsed,
            trained_tokens_per_s=num_tokens / elapsed,
        )
        return metrics

    def split(self, count: int, step: int) -> list[np.ndarray]:
        """Sample indices of each mini-batch: a shuffle seeded by (seed, ``step``), so every
        rank (and a resumed run) splits alike without a message. One mini-batch keeps the
        order."""
        parts = min(self.config.loss.minibatches, count)
        if parts <= 1:
            return [np.arange(count)]
        seed = [self.config.seed % 2**32, step]
        order = np.random.default_rng(seed).permutation(count)
        return [np.sort(idx) for idx in np.array_split(order, parts)]

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast where ``autocast`` asks for it (``auto``: where this CPU or GPU
        computes bf16 fast, :func:`arena.models.fast_dtype`); none otherwise."""
        dtype = autocast_dtype(self.config.autocast, self.device)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=getattr(torch, dtype))

    def _minibatch(
        self, samples: list[Sample], silent_tokens: float = 0.0, silent_turns: float = 0.0
    ) -> _MiniBatch:
        """This rank's micro-batches of one mini-batch, weighted to aggregate over all ranks
        and over the mini-batch's share of the silent turns (see :meth:`run`)."""
        cfg = self.config
        mine = shard(samples, self.dist.rank, self.dist.world)
        batches = [
            mb.to(self.device)
            for mb in pack(mine, cfg.batch.micro_batch_tokens, self.pad_id, cfg.batch.shared_prefix)
        ]
        # Every rank runs as many forwards as the busiest (FSDP2 gathers weights in each).
        count = int(ddist.all_reduce_max(float(len(batches)), self.dist, self.device))
        real = len(batches)
        batches += [self._dummy_batch() for _ in range(count - real)]
        num_tokens = sum(s.loss_elements for s in samples)
        constant = cfg.loss.norm_constant or cfg.batch.max_response_tokens
        for mb in batches:
            mb.agg_weights = aggregation_weights(
                mb.seq_lengths,
                cfg.loss.aggregation,
                num_tokens + silent_tokens,
                len(samples) + silent_turns,
                constant,
            )
        return _MiniBatch(batches, real, num_tokens)

    def _old_logprobs(self, parts: list[_MiniBatch]) -> None:
        """Old-policy (and reference) logprobs of the mini-batches after the first.

        Their first pass runs after earlier mini-batches moved the weights, so it cannot serve
        as the old policy: one no-grad forward each, before the first optimizer step.
        """
        for mb in (mb for part in parts for mb in part.batches):
            with torch.no_grad(), self.autocast():
                mb.prox_logprobs = self._elements(self.policy, mb)[0]
            if self.config.loss.kl_coef > 0:
                mb.ref_logprobs = self._reference_logprobs(mb)

    def _accumulate(self, batches: list[MicroBatch], real: int) -> tuple[dict[str, float], bool]:
        """Forward and backward every micro-batch; gradients sync on the last one only.

        A micro-batch without old logprobs takes them from this pass: only its first, which
        :meth:`run` runs before any optimizer step.
        """
        cfg = self.config.loss
        sums: Counter[str] = Counter()
        finite = True
        for i, mb in enumerate(batches):
            ddist.sync_gradients(self.policy, i == len(batches) - 1)
            with self.autocast():
                logprobs, entropy = self._elements(self.policy, mb, cfg.entropy_coef > 0)
            if mb.prox_logprobs is None:
                mb.prox_logprobs = logprobs.detach()
                if cfg.kl_coef > 0:
                    mb.ref_logprobs = self._reference_logprobs(mb)
            out = policy_loss(
                logprobs,
                entropy,
                mb.prox_logprobs,
                mb.sampler_logprobs,
                mb.advantages,
                mb.weights,
                mb.agg_weights,
                cfg,
                mb.ref_logprobs,
            )
            finite = finite and bool(torch.isfinite(out.loss))
            # DDP and FSDP2 average gradients over ranks; the shares already sum to the mean.
            (out.loss * self.dist.world).backward()
            if i < real:
                sums.update({k: float(v) for k, v in out.sums.items()})
                sums["loss"] += float(out.loss.detach())
        return ddist.all_reduce_sum(dict(sums), self.dist, self.device), finite

    def _clip_gradients(self) -> tuple[float, dict[str, float]]:
        """Clip to optim.grad_clip (if > 0; each adapter alone with named policies) and return
        the global norm before clipping, and each adapter's."""
        if self.adapters is not None:
            norms = self.adapters.clip_gradients()
            return math.sqrt(sum(n * n for n in norms.values())), norms
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.config.optim.grad_clip if self.config.optim.grad_clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        full = getattr(norm, "full_tensor", None)  # FSDP2 returns a DTensor
        return float(full() if callable(full) else norm), {}

    def _elements(
        self,
        module: torch.nn.Module,
        mb: MicroBatch,
        entropy_grad: bool = False,
        base: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The logprobs and entropies of ``mb``'s loss elements under ``module`` (a
        :class:`TokenLogprobs`): its scored tokens, choice turns reduced (trainers/choice.py).
        Each row goes through its turn's adapter, or through the base alone (``base``)."""
        rows = [] if base else (mb.row_adapters or [])
        loss = self.config.loss
        per_token, per_turn = mb.temperatures(loss.temperature, loss.adapter_temperatures)
        tempered = {"token_temperature": per_token} if isinstance(per_token, torch.Tensor) else {}
        with route(self.model, rows):
            tokens, entropy = module(*mb.forward_args(), entropy_grad=entropy_grad, **tempered)
        return element_logprobs(tokens, entropy, mb, per_turn)

    def _reference_logprobs(self, mb: MicroBatch) -> torch.Tensor:
        with torch.no_grad(), self.autocast():
            if self.reference is not None:
                module = TokenLogprobs(
                    self.reference, self.config.loss.temperature, self.config.sparse_logits
                )
                return self._elements(module, mb)[0]
            if self.adapters is not None:  # named policies: the base is every one's reference
                return self._elements(self.policy, mb, base=True)[0]
            with self.model.disable_adapter():  # LoRA: the base model is the reference
                return self._elements(self.policy, mb)[0]

    def _dummy_batch(self) -> MicroBatch:
        """A one-token micro-batch with zero weight, for ranks that ran out of turns."""
        ids = np.array([self.pad_id], dtype=np.int32)
        sample = Sample(
            episode_id="",
            turn_index=0,
            game="",
            role="",
            seat="",
            group="",
            prompt_ids=ids,
            response_ids=ids,
            sampler_logprobs=np.zeros(1, np.float32),
            valid=True,
            policy_version=0,
            ret=0.0,
            outcome=0.0,
            weight=0.0,
        )
        return pack([sample], self.config.batch.micro_batch_tokens, self.pad_id)[0].to(self.device)


def _loss_metrics(totals: dict[str, float], passes: int, steps: int) -> dict[str, float]:
    """Means over the optimizer steps: losses per step, the others per token and pass
    (``passes`` counts each step's tokens), so clip_frac is the share of clipped tokens."""
    per_step = ("loss", "pg_loss", "kl", "grad_norm")
    out = {
        k: v / max(steps, 1)
        for k, v in totals.items()
        if k in per_step or k.startswith("grad_norm/")
    }
    out.update({k: totals[k] / max(passes, 1) for k in _PER_TOKEN if k in totals})
    return out
