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
one optimizer step each, against the policy from before the first (trainers/update.py); it
counts as one step (the weights' version, the LR schedule, checkpoints) however many it took.

Under ``torchrun`` every rank builds a Learner; rank 0 adds episodes and calls :meth:`step`,
:meth:`weight_buckets` and :meth:`save_checkpoint`, and the other ranks call :meth:`follow`,
which mirrors those collective calls until rank 0 calls :meth:`close`.

The bus actor around it is :class:`trainers.learner_actor.LearnerActor` (``arena learner --help``).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file

from arena.core.errors import ConfigError
from arena.models import resolve_device
from arena.models.adapter_shape import SHARED_ADAPTER
from arena.models.lora import FLAT_PREFIX
from arena.records import Episode
from arena.weights.buckets import make_buckets
from trainers import distributed as ddist
from trainers import learner_checkpoint as checkpoints
from trainers.adapters import NamedAdapters, sort_by_adapter
from trainers.advantages import EMABaseline, compute_advantages, stats_by_key
from trainers.batch import Sample
from trainers.config import LearnerConfig
from trainers.filters import apply_staleness, filter_samples, staleness_metrics
from trainers.inbox import Inbox
from trainers.logprobs import TokenLogprobs, unwrap_peft
from trainers.optim import build_optimizer
from trainers.per_state import PerStateUpdate
from trainers.precision import has_bfloat16_copy, snap_to_bfloat16
from trainers.trained_model import (
    add_lora,
    frozen_copy,
    hf_state_dict,
    load_hf_weights,
    load_lora_state_dict,
    load_policy,
    lora_buffer,
)
from trainers.update import PolicyUpdate

log = logging.getLogger("arena.learner")


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


class Learner:
    """One trained policy; see the module docstring."""

    def __init__(
        self, config: LearnerConfig | None = None, model: Any = None, tokenizer: Any = None
    ) -> None:
        self.config = config = config or LearnerConfig()
        if config.lora.serve not in ("merged", "adapter"):
            raise ConfigError(
                f"learner.lora.serve must be merged or adapter, got {config.lora.serve!r}"
            )
        if config.loss.aggregation == "constant" and not (
            config.loss.norm_constant or config.batch.max_response_tokens
        ):
            raise ConfigError(
                "learner.loss.aggregation=constant divides by learner.loss.norm_constant, else "
                "learner.batch.max_response_tokens: set one of them"
            )
        device = resolve_device(config.device)
        self.dist = ddist.init_distributed(config.distributed, device)
        self.device = ddist.local_device(device, self.dist)
        _seed_everything(config.seed)
        if model is None:
            model, tokenizer = load_policy(config, self.device)
        self.tokenizer = tokenizer
        model = model.to(self.device).train()
        resume = checkpoints.resume_path(config.checkpoint)
        if resume is None and has_bfloat16_copy(config.autocast, config.sampled_in, self.device):
            changed = snap_to_bfloat16(model)
            log.info("rounded %d float32 weights to bfloat16 (trainers/precision.py)", changed)
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        self.vocab_size = int(unwrap_peft(model).get_input_embeddings().num_embeddings)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0
        # The KL reference is the initial policy, also after a resume (LoRA: adapters off).
        frozen_base = config.lora.enabled or bool(config.adapters)
        with_reference = config.loss.kl_coef > 0 and not frozen_base
        self.reference = frozen_copy(model) if with_reference else None
        if resume is not None and not frozen_base:
            with checkpoints.reading(resume):
                load_hf_weights(model, resume / "model")
        with checkpoints.reading(resume):
            self.adapters = NamedAdapters(model, config, resume) if config.adapters else None
        if config.lora.enabled:
            model = add_lora(model, config.lora)
            if resume is not None:
                with checkpoints.reading(resume):
                    load_lora_state_dict(model, load_file(str(resume / "adapter.safetensors")))
        self.model = model
        module = TokenLogprobs(model, config.loss.temperature, config.sparse_logits)
        self.policy = ddist.wrap(module, config.distributed.strategy, self.dist, self.device)
        self.optimizer = build_optimizer(model, config.optim, self.device)
        self.warnings: list[str] = []
        """What the run should hear about, besides this learner's log (``status`` carries it)."""
        if config.checkpoint.dir and self.dist.is_main:
            warnings = [checkpoints.check_space(model, config.checkpoint)]
            if config.checkpoint.resume:
                warnings.append(checkpoints.passed_by(config.checkpoint.dir, resume))
            for warning in filter(None, warnings):
                log.warning("%s", warning)
                self.warnings.append(warning)
        update = PerStateUpdate if config.per_state.enabled else PolicyUpdate
        self.update = update(
            config,
            model,
            self.policy,
            self.optimizer,
            self.reference,
            self.dist,
            self.device,
            self.pad_id,
            self.adapters,
        )
        self.ema = EMABaseline(config.advantage.ema_alpha)
        self.state = LearnerState()
        self.inbox = Inbox(
            config.advantage.gamma,
            self.state.counters,
            config.batch.policy,
            self.vocab_size,
            config.batch.dedupe_window,
            config.batch.known_policies,
        )
        if resume is not None:
            with checkpoints.reading(resume):
                checkpoints.load_training_state(self, resume)
            log.info("resumed from %s at step %d", resume, self.state.step)

    # -- input ---------------------------------------------------------------------------
    def add_episodes(self, episodes: Iterable[Episode | dict[str, Any]]) -> int:
        """Queue the trained turns of each episode; returns how many episodes were accepted.

        A malformed record (missing field, wrong dtype, mismatched lengths, token ids outside
        the vocabulary, non-finite numbers, a sampler log-probability above 0 by more than
        :data:`trainers.batch.LOGPROB_TOLERANCE`) or a duplicate id is skipped with a logged
        reason and a counter; the others go on.
        """
        return sum(self.add_episode(item) for item in episodes)

    def add_episode(self, item: Episode | dict[str, Any]) -> bool:
        """Queue one episode (see :meth:`add_episodes`); False if it was dropped."""
        return self.inbox.add(item)

    def add_group(self, items: Iterable[Episode | dict[str, Any]]) -> int:
        """Queue the episodes of one group so that a step takes all of them or none (checked
        one by one as in :meth:`add_episodes`); returns how many were accepted."""
        return self.inbox.add_group(items)

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
                self._step([Sample(**s) for s in command["samples"]], command.get("at"))
            elif name == "export":
                self._export()
            elif name == "checkpoint":
                checkpoints.save(self)

    def close(self) -> None:
        """Release the follower ranks (rank 0 only; a no-op in a single process)."""
        if self.dist.enabled and self.dist.is_main:
            self._lead({"cmd": "stop"})

    # -- training ------------------------------------------------------------------------
    def step(self, at: int | None = None) -> dict[str, float] | None:
        """One update over the pending turns; returns metrics, or None when nothing is pending.

        ``at``: the run's step this update is, given to a named policy's own learner
        (arena/run/policy_learners.py), whose step count must stay the run's although it
        restarts alone. One that missed steps (it resumed from an older checkpoint while the run
        trained on) numbers this update ``at``: its step, version and checkpoint names (and
        so its LR schedule from the next update) skip the steps it lost. One already at ``at`` or past it (the run went back to
        its own learner's older checkpoint) takes no step and keeps its turns for the step
        after: None."""
        if at is not None and at <= self.state.step:
            return None
        samples = self.inbox.take(self.config.batch.max_batch_samples)
        if not samples:
            return None
        # in the order of their episodes, not of their arrival: a run repeats from its seed
        samples.sort(key=lambda s: (s.episode_id, s.turn_index))
        self._lead({"cmd": "step", "samples": [s.to_dict() for s in samples], "at": at})
        return self._step(samples, at)

    def _step(self, samples: list[Sample], at: int | None = None) -> dict[str, float]:
        start = time.perf_counter()
        cfg = self.config
        before = self.state.step
        metrics: dict[str, float] = {
            "version_before": float(self.version),
            "turns": float(len(samples)),
            **staleness_metrics([s.policy_version for s in samples], self.version),
        }
        samples, misfits, per_policy = sort_by_adapter(
            samples, self.adapters.names if self.adapters is not None else []
        )
        metrics.update(per_policy)
        if misfits:
            self.state.counters["rejected_adapter"] += len(misfits)
            log.warning(
                "%d turns were played by adapters this learner does not train (e.g. %r; it "
                "trains %s): left out",
                len(misfits),
                misfits[0].adapter,
                self.adapters.names if self.adapters is not None else "the base only",
            )
        samples, stale = apply_staleness(samples, self.version, cfg.batch)
        self._assign_advantages(samples, metrics)
        kept, filtered, silent = filter_samples(samples, cfg.batch)
        for reason, count in (stale + filtered).items():
            metrics[f"filtered/{reason}"] = float(count)
        metrics["samples"] = float(len(kept))
        if kept:
            metrics.update(self._update(kept, silent))
        else:
            # No turn carried signal past the filters (e.g. every return was equal). The batch
            # still counts as a step, so a run's step count and resume point follow the batches
            # it consumed; the weights are unchanged under the new version number.
            self.state.step += 1
            metrics.update(version=float(self.state.step), no_signal=1.0)
        if at is not None and at > self.state.step and not metrics.get("skipped"):
            self.state.step = at  # numbered as the run's step: see step()
            metrics["version"] = float(at)
        every = cfg.checkpoint.every
        # due when the step reached a multiple of ``every`` (or, numbered ``at``, passed one)
        checkpoint_due = cfg.checkpoint.dir and self.state.step // every > before // every
        if checkpoint_due and not metrics.get("skipped"):
            checkpoints.save(self)
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
        # Reported per advantage key (adv/<game>/<agent>/mean with the default key), the
        # statistics the advantages were normalized with; a key with ``prompt`` is reported
        # without it (one prompt per board would write thousands of metrics a step).
        shown = [i for i, name in enumerate(acfg.key) if name != "prompt"]
        reported = [tuple(k[i] for i in shown) or ("all",) for k in keys]
        for name, values in (("adv", advantages), ("return", [s.ret for s in samples])):
            for key, stats in stats_by_key(values, reported).items():
                for stat, value in stats.items():
                    metrics[f"{name}/{'/'.join(key)}/{stat}"] = value

    def _update(self, kept: list[Sample], silent: list[Sample]) -> dict[str, float]:
        """The optimizer steps on ``kept`` (trainers/update.py); the step counts once, however
        many it took, unless the first met a non-finite loss or gradient."""
        metrics = self.update.run(kept, self.state.step, self.state.counters, silent)
        if metrics.get("skipped"):
            return metrics
        self.state.step += 1
        self.state.samples_trained += len(kept)
        self.state.tokens_trained += int(metrics["tokens"])
        metrics["version"] = float(self.state.step)
        return metrics

    # -- weights out ---------------------------------------------------------------------
    def export_weights(
        self, changed_only: bool = False, on_device: bool = False
    ) -> dict[str, torch.Tensor]:
        """CPU copies of the current weights under transformers names (LoRA merged, or with
        ``lora.serve: adapter`` the adapter alone, ``lora_adapter.shared-lora``); with named
        policies, their adapters alone (the base never changes), and with
        ``changed_only`` only the adapters that changed since the last export. ``on_device``:
        copies on the learner's device instead (for a same-GPU publish by CUDA IPC)."""
        self._lead({"cmd": "export"})
        if self.adapters is not None:
            return self.adapters.export(changed_only, on_device)
        return self._export(on_device)

    @property
    def serves_adapter(self) -> bool:
        """Whether updates carry the shared policy's adapter alone (``lora.serve: adapter``)."""
        return self.config.lora.enabled and self.config.lora.serve == "adapter"

    def _export(self, on_device: bool = False) -> dict[str, torch.Tensor]:
        """The weights of a shared policy (collective): merged, or its adapter alone."""
        if self.serves_adapter:
            return {f"{FLAT_PREFIX}{SHARED_ADAPTER}": lora_buffer(self.model, on_device)}
        return hf_state_dict(self.model, on_device)

    @property
    def separable_weights(self) -> bool:
        """Whether an update may carry only what changed (named policies: each adapter)."""
        return self.adapters is not None

    def weight_buckets(self, bucket_bytes: int | None = None) -> Iterator[dict[str, Any]]:
        """Bucket bodies of the current weights, tagged with :attr:`version` (arena/weights/buckets.py)."""
        state = self.export_weights()
        return make_buckets(state, self.version, bucket_bytes or self.config.bucket_bytes)

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self) -> Path | None:
        """Save now (collective); returns the checkpoint directory on rank 0."""
        self._lead({"cmd": "checkpoint"})
        return checkpoints.save(self)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
