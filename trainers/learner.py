"""The shared-weight learner: episodes in, policy updates, checkpoints and weights out.

In-process use (a synchronous training loop)::

    learner = Learner(LearnerConfig(model="tiny"))
    learner.add_episodes(episodes)          # Episode objects or Episode.to_dict() bodies
    metrics = learner.step()                # one update over the pending turns
    for body in learner.weight_buckets():   # publish on topic weights.<name>
        ...

Rewards: a turn's ``reward`` is its own reward, and the rollout side adds the seat's final
outcome to the seat's last turn; returns are discounted sums of those (trainers/advantages.py).

One update is ``loss.ppo_epochs`` passes over ``loss.minibatches`` mini-batches of the turns,
one optimizer step each, against the policy from before the first (trainers/losses.py); it
counts as one step (the weights' version, the LR schedule, checkpoints) however many it took.

Under ``torchrun`` every rank builds a Learner; rank 0 adds episodes and calls :meth:`step`,
:meth:`weight_buckets` and :meth:`save_checkpoint`, and the other ranks call :meth:`follow`,
which mirrors those collective calls until rank 0 calls :meth:`close`.

The bus actor around it is :class:`trainers.learner_actor.LearnerActor` (``arena learner --help``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from safetensors.torch import load_file
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from arena.models import fast_dtype, resolve_device
from arena.records import Episode
from arena.weights.buckets import make_buckets
from trainers import checkpoint as ckpt
from trainers import distributed as ddist
from trainers.advantages import EMABaseline, compute_advantages, stats_by_key
from trainers.batch import MicroBatch, Sample, pack, shard
from trainers.config import LearnerConfig
from trainers.filters import apply_staleness, filter_samples
from trainers.inbox import Inbox
from trainers.logprobs import TokenLogprobs, unwrap_peft
from trainers.losses import aggregation_weights, policy_loss
from trainers.optim import build_optimizer, learning_rate, set_learning_rate
from trainers.trained_model import (
    add_lora,
    frozen_copy,
    hf_state_dict,
    load_hf_weights,
    load_lora_state_dict,
    load_policy,
    lora_state_dict,
    save_hf,
)

log = logging.getLogger("arena.learner")
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
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


@dataclass
class LearnerState:
    """What the learner has done; ``step`` is also the version of the weights it holds."""

    step: int = 0
    samples_trained: int = 0
    tokens_trained: int = 0
    counters: Counter[str] = field(default_factory=Counter)
    """episodes_accepted, rejected_bad_record, rejected_duplicate, skipped_nonfinite, ..."""

    @property
    def version(self) -> int:
        return self.step


class _MiniBatch(NamedTuple):
    """One optimizer step's share of a batch on this rank: its micro-batches (dummies pad them
    to the busiest rank's count), how many hold turns, and the trained tokens of all ranks."""

    batches: list[MicroBatch]
    real: int
    tokens: int


class Learner:
    """One trained policy; see the module docstring."""

    def __init__(
        self, config: LearnerConfig | None = None, model: Any = None, tokenizer: Any = None
    ) -> None:
        self.config = config = config or LearnerConfig()
        device = resolve_device(config.device)
        self.dist = ddist.init_distributed(config.distributed, device)
        self.device = ddist.local_device(device, self.dist)
        _seed_everything(config.seed)
        if model is None:
            model, tokenizer = load_policy(config, self.device)
        self.tokenizer = tokenizer
        model = model.to(self.device).train()
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        self.vocab_size = int(unwrap_peft(model).get_input_embeddings().num_embeddings)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0
        # The KL reference is the initial policy, also after a resume (LoRA: adapters off).
        with_reference = config.loss.kl_coef > 0 and not config.lora.enabled
        self.reference = frozen_copy(model) if with_reference else None
        resume = self._resume_path()
        if resume is not None and not config.lora.enabled:
            load_hf_weights(model, resume / "model")
        if config.lora.enabled:
            model = add_lora(model, config.lora)
            if resume is not None:
                load_lora_state_dict(model, load_file(str(resume / "adapter.safetensors")))
        self.model = model
        module = TokenLogprobs(model, config.loss.temperature, config.sparse_logits)
        self.policy = ddist.wrap(module, config.distributed.strategy, self.dist, self.device)
        self.optimizer = build_optimizer(model, config.optim, self.device)
        self.ema = EMABaseline(config.advantage.ema_alpha)
        self.state = LearnerState()
        self.inbox = Inbox(
            config.advantage.gamma,
            self.state.counters,
            config.batch.policy,
            self.vocab_size,
            config.batch.dedupe_window,
        )
        if resume is not None:
            self._load_training_state(resume)
            log.info("resumed from %s at step %d", resume, self.state.step)

    # -- input ---------------------------------------------------------------------------
    def add_episodes(self, episodes: Iterable[Episode | dict[str, Any]]) -> int:
        """Queue the trained turns of each episode; returns how many episodes were accepted.

        A malformed record (missing field, wrong dtype, mismatched lengths, token ids outside
        the vocabulary, non-finite numbers) or a duplicate id is skipped with a logged reason
        and a counter; the others go on.
        """
        return sum(self.add_episode(item) for item in episodes)

    def add_episode(self, item: Episode | dict[str, Any]) -> bool:
        """Queue one episode (see :meth:`add_episodes`); False if it was dropped."""
        return self.inbox.add(item)

    @property
    def pending_samples(self) -> int:
        return len(self.inbox)

    @property
    def version(self) -> int:
        return self.state.step

    # -- collective commands (rank 0 leads, the others follow) ---------------------------
    def _lead(self, command: dict[str, Any]) -> None:
        """Rank 0: tell the followers which collective call comes next."""
        if self.dist.enabled and self.dist.is_main:
            ddist.broadcast_body(command, self.dist, self.device)

    def follow(self) -> None:
        """On ranks > 0: mirror rank 0's step/export/checkpoint calls until it closes."""
        while True:
            command = ddist.broadcast_body(None, self.dist, self.device)
            name = command["cmd"]
            if name == "stop":
                return
            if name == "step":
                self._step([Sample(**s) for s in command["samples"]])
            elif name == "export":
                hf_state_dict(self.model)
            elif name == "checkpoint":
                self._save_checkpoint()

    def close(self) -> None:
        """Release the follower ranks (rank 0 only; a no-op in a single process)."""
        if self.dist.enabled and self.dist.is_main:
            self._lead({"cmd": "stop"})

    # -- training ------------------------------------------------------------------------
    def step(self) -> dict[str, float] | None:
        """One update over the pending turns; returns metrics, or None when nothing is pending."""
        samples = self.inbox.take(self.config.batch.max_batch_samples)
        if not samples:
            return None
        self._lead({"cmd": "step", "samples": [s.to_dict() for s in samples]})
        return self._step(samples)

    def _step(self, samples: list[Sample]) -> dict[str, float]:
        start = time.perf_counter()
        cfg = self.config
        metrics: dict[str, float] = {
            "version_before": float(self.version),
            "turns": float(len(samples)),
            **staleness_metrics([s.policy_version for s in samples], self.version),
        }
        samples, stale = apply_staleness(samples, self.version, cfg.batch)
        self._assign_advantages(samples, metrics)
        kept, filtered = filter_samples(samples, cfg.batch)
        for reason, count in (stale + filtered).items():
            metrics[f"filtered/{reason}"] = float(count)
        metrics["samples"] = float(len(kept))
        if kept:
            metrics.update(self._update(kept))
        else:
            # No turn carried signal past the filters (e.g. every return was equal). The batch
            # still counts as a step, so a run's step count and resume point follow the batches
            # it consumed; the weights are unchanged under the new version number.
            self.state.step += 1
            metrics.update(version=float(self.state.step), no_signal=1.0)
        checkpoint_due = (
            cfg.checkpoint.dir
            and self.state.step > 0
            and self.state.step % cfg.checkpoint.every == 0
        )
        if checkpoint_due and not metrics.get("skipped"):
            self._save_checkpoint()
        metrics["step"] = float(self.state.step)
        metrics["step_time"] = time.perf_counter() - start
        counters = dict(self.state.counters)  # a copy: the bus thread may be counting
        metrics.update({f"count/{k}": float(v) for k, v in counters.items()})
        return metrics

    def _assign_advantages(self, samples: list[Sample], metrics: dict[str, float]) -> None:
        if not samples:
            return
        acfg = self.config.advantage
        keys = [s.key(acfg.key) for s in samples]
        advantages = compute_advantages(
            acfg.mode,
            [s.ret for s in samples],
            [s.outcome for s in samples],
            keys,
            [s.group for s in samples],
            eps=acfg.eps,
            scale_by_std=acfg.scale_by_std,
            whiten_all=acfg.whiten,
            ema=self.ema,
            trajectories=[(s.episode_id, s.seat) for s in samples],
            trajectory_returns=[s.traj_return for s in samples],
        )
        for sample, advantage in zip(samples, advantages, strict=True):
            sample.advantage = float(advantage)
        game_role = [(s.game, s.role) for s in samples]
        for name, values in (("adv", advantages), ("return", [s.ret for s in samples])):
            for (game, role), stats in stats_by_key(values, game_role).items():
                for stat, value in stats.items():
                    metrics[f"{name}/{game}/{role}/{stat}"] = value

    def _update(self, kept: list[Sample]) -> dict[str, float]:
        """ppo_epochs passes over the mini-batches of ``kept``, one optimizer step each.

        Every rank holds all of ``kept`` (rank 0 broadcast it), splits it alike and trains its
        shard of each mini-batch, so all ranks take the same optimizer steps in lockstep.
        """
        cfg = self.config
        start = time.perf_counter()
        parts = [self._minibatch([kept[i] for i in idx]) for idx in self._split(len(kept))]
        self._old_logprobs(parts[1:])  # mini-batch 0's first pass (before any step) gives its own
        lr = learning_rate(self.state.step, cfg.optim)  # per learner step: see loss.minibatches
        set_learning_rate(self.optimizer, lr)
        totals: Counter[str] = Counter()
        steps = passes = 0
        for epoch, part in itertools.product(range(cfg.loss.ppo_epochs), parts):
            sums, finite = self._accumulate(part.batches, part.real)
            grad_norm = self._clip_gradients()
            bad = not (finite and math.isfinite(grad_norm))
            if ddist.all_reduce_max(float(bad), self.dist, self.device) > 0:
                self.optimizer.zero_grad(set_to_none=True)
                self.state.counters["skipped_nonfinite"] += 1
                log.warning(
                    "non-finite loss or gradient at step %d (epoch %d, optimizer step %d): "
                    "update skipped, weights kept",
                    self.state.step,
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
        num_tokens = sum(part.tokens for part in parts)
        self.state.step += 1
        self.state.samples_trained += len(kept)
        self.state.tokens_trained += num_tokens
        elapsed = time.perf_counter() - start
        mine = sum(mb.num_input_tokens for part in parts for mb in part.batches[: part.real])
        tokens = ddist.all_reduce_sum({"in": float(mine)}, self.dist, self.device)["in"]
        metrics = self._loss_metrics(totals, passes, steps)
        metrics.update(
            lr=lr,
            optimizer_steps=float(steps),
            version=float(self.state.step),
            tokens=float(num_tokens),
            input_tokens=tokens,
            update_time=elapsed,
            tokens_per_s=tokens / elapsed,
            trained_tokens_per_s=num_tokens / elapsed,
        )
        return metrics

    def _split(self, count: int) -> list[np.ndarray]:
        """Sample indices of each mini-batch: a shuffle seeded by (seed, step), so every rank
        (and a resumed run) splits alike without a message. One mini-batch keeps the order."""
        parts = min(self.config.loss.minibatches, count)
        if parts <= 1:
            return [np.arange(count)]
        seed = [self.config.seed % 2**32, self.state.step]
        order = np.random.default_rng(seed).permutation(count)
        return [np.sort(idx) for idx in np.array_split(order, parts)]

    def _minibatch(self, samples: list[Sample]) -> _MiniBatch:
        """This rank's micro-batches of one mini-batch, weighted to aggregate over all ranks."""
        cfg = self.config
        mine = shard(samples, self.dist.rank, self.dist.world)
        batches = [
            mb.to(self.device) for mb in pack(mine, cfg.batch.micro_batch_tokens, self.pad_id)
        ]
        # Every rank runs as many forwards as the busiest (FSDP2 gathers weights in each).
        count = int(ddist.all_reduce_max(float(len(batches)), self.dist, self.device))
        real = len(batches)
        batches += [self._dummy_batch() for _ in range(count - real)]
        num_tokens = sum(len(s.response_ids) for s in samples)
        constant = cfg.loss.norm_constant or cfg.batch.max_response_tokens
        for mb in batches:
            mb.agg_weights = aggregation_weights(
                mb.seq_lengths, cfg.loss.aggregation, num_tokens, len(samples), constant
            )
        return _MiniBatch(batches, real, num_tokens)

    def _old_logprobs(self, parts: list[_MiniBatch]) -> None:
        """Old-policy (and reference) logprobs of the mini-batches after the first.

        Their first pass runs after earlier mini-batches moved the weights, so it cannot serve
        as the old policy: one no-grad forward each, before the first optimizer step.
        """
        for mb in (mb for part in parts for mb in part.batches):
            with torch.no_grad(), self._autocast():
                args = (mb.input_ids, mb.attention_mask, mb.target_ids, mb.loss_mask)
                mb.prox_logprobs = self.policy(*args)[0]
            if self.config.loss.kl_coef > 0:
                mb.ref_logprobs = self._reference_logprobs(mb)

    def _accumulate(self, batches: list[MicroBatch], real: int) -> tuple[dict[str, float], bool]:
        """Forward and backward every micro-batch; gradients sync on the last one only.

        A micro-batch without old logprobs takes them from this pass: only its first, which
        :meth:`_update` runs before any optimizer step.
        """
        cfg = self.config.loss
        sums: Counter[str] = Counter()
        finite = True
        for i, mb in enumerate(batches):
            ddist.sync_gradients(self.policy, i == len(batches) - 1)
            with self._autocast():
                logprobs, entropy = self.policy(
                    mb.input_ids,
                    mb.attention_mask,
                    mb.target_ids,
                    mb.loss_mask,
                    entropy_grad=cfg.entropy_coef > 0,
                )
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

    def _clip_gradients(self) -> float:
        """Clip to optim.grad_clip (if > 0) and return the global norm before clipping."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.config.optim.grad_clip if self.config.optim.grad_clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        full = getattr(norm, "full_tensor", None)  # FSDP2 returns a DTensor
        return float(full() if callable(full) else norm)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        dtype = self.config.autocast
        if dtype == "auto":
            dtype = "bfloat16" if fast_dtype(str(self.device)) == "bfloat16" else None
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=getattr(torch, dtype))

    def _reference_logprobs(self, mb: MicroBatch) -> torch.Tensor:
        with torch.no_grad(), self._autocast():
            if self.reference is not None:
                module = TokenLogprobs(
                    self.reference, self.config.loss.temperature, self.config.sparse_logits
                )
                return module(mb.input_ids, mb.attention_mask, mb.target_ids, mb.loss_mask)[0]
            with self.model.disable_adapter():  # LoRA: the base model is the reference
                return self.policy(mb.input_ids, mb.attention_mask, mb.target_ids, mb.loss_mask)[0]

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

    @staticmethod
    def _loss_metrics(totals: dict[str, float], passes: int, steps: int) -> dict[str, float]:
        """Means over the optimizer steps: losses per step, the others per token and pass
        (``passes`` counts each step's tokens), so clip_frac is the share of clipped tokens."""
        per_step = ("loss", "pg_loss", "kl", "grad_norm")
        out = {k: totals[k] / max(steps, 1) for k in per_step if k in totals}
        out.update({k: totals[k] / max(passes, 1) for k in _PER_TOKEN if k in totals})
        return out

    # -- weights out ---------------------------------------------------------------------
    def export_weights(self) -> dict[str, torch.Tensor]:
        """CPU copies of the current weights under transformers names (LoRA merged)."""
        self._lead({"cmd": "export"})
        return hf_state_dict(self.model)

    def weight_buckets(self, bucket_bytes: int | None = None) -> Iterator[dict[str, Any]]:
        """Bucket bodies of the current weights, tagged with :attr:`version` (arena/weights/buckets.py)."""
        state = self.export_weights()
        return make_buckets(state, self.version, bucket_bytes or self.config.bucket_bytes)

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self) -> Path | None:
        """Save now (collective); returns the checkpoint directory on rank 0."""
        self._lead({"cmd": "checkpoint"})
        return self._save_checkpoint()

    def _save_checkpoint(self) -> Path | None:
        cfg = self.config
        if not cfg.checkpoint.dir:
            raise ValueError("checkpoint.dir is not set")
        weights = hf_state_dict(self.model)
        adapter = lora_state_dict(self.model) if cfg.lora.enabled else None
        optimizer = get_optimizer_state_dict(self.policy, self.optimizer, options=_FULL)
        if not self.dist.is_main:
            ddist.barrier(self.dist)
            return None
        state = {
            "step": self.state.step,
            "samples_trained": self.state.samples_trained,
            "tokens_trained": self.state.tokens_trained,
            "counters": dict(self.state.counters),
            "ema": self.ema.state_dict(),
            "seen_episodes": self.inbox.seen_ids(),
            "config": asdict(cfg),
        }
        path = ckpt.save_training(
            cfg.checkpoint.dir,
            cfg.checkpoint.keep,
            state,
            optimizer,
            lambda out: save_hf(self.model, weights, self.tokenizer, out),
            adapter,
        )
        log.info("checkpoint %s", path)
        ddist.barrier(self.dist)
        return path

    def _resume_path(self) -> Path | None:
        cfg = self.config.checkpoint
        return ckpt.latest_checkpoint(cfg.dir) if cfg.dir and cfg.resume else None

    def _load_training_state(self, path: Path) -> None:
        optimizer, saved = ckpt.load_training(path)
        set_optimizer_state_dict(self.policy, self.optimizer, optimizer, options=_FULL)
        self.state.step = saved["step"]
        self.state.samples_trained = saved["samples_trained"]
        self.state.tokens_trained = saved["tokens_trained"]
        self.state.counters.update(saved["counters"])  # the inbox shares this Counter
        self.ema.load_state_dict(saved["ema"])
        self.inbox.load_seen_ids(saved["seen_episodes"])


def staleness_metrics(policy_versions: Sequence[int], version: int) -> dict[str, float]:
    """How stale a step's turns are: per turn, the learner's version at the step minus the
    version of the policy that generated it (``Turn.policy_version``), as ``staleness_mean``,
    ``staleness_p50`` (the median) and ``staleness_max``. Every turn the step took counts,
    those the staleness bound then drops or down-weights included (``filtered/stale_*`` counts
    them). In sync mode every turn is 0 versions old; in async mode turns generated while the
    learner trained are older (``arena train`` paces them to at most
    ``batch.max_staleness`` versions). Empty when there are no turns."""
    if not policy_versions:
        return {}
    lags = version - np.asarray(policy_versions, dtype=np.float64)
    return {
        "staleness_mean": float(lags.mean()),
        "staleness_p50": float(np.median(lags)),
        "staleness_max": float(lags.max()),
    }


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
