"""The learner's configuration: one dataclass per section, one docstring per field.

The dataclasses are plain and omegaconf-friendly: :func:`arena.core.config.load_config` merges
YAML and ``key=value`` overrides into them, and :meth:`LearnerConfig.from_dict` builds one from a
nested mapping; both reject an unknown key by naming the nearest valid one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from arena.core.config import from_dict
from arena.core.errors import check_choice
from arena.models.adapter_shape import DEFAULT_ALPHA, DEFAULT_RANK, DEFAULT_TARGET_MODULES

ADVANTAGE_MODES = ("batch", "ema", "ema-turn", "group", "broadcast")
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "constant")
STALE_MODES = ("reject", "downweight")
SCHEDULES = ("constant", "linear", "cosine")
STRATEGIES = ("ddp", "fsdp2")


@dataclass
class AdvantageConfig:
    mode: str = "batch"
    """How returns become advantages: ``batch`` (per-key mean/std, MARS), ``ema`` (per-key
    running baseline updated once per trajectory, SPIRAL's RAE), ``ema-turn`` (the same baseline
    updated once per turn), ``group`` (GRPO per prompt group) or ``broadcast`` (episode outcome
    on every turn, then group-normalized, Flow-GRPO). Formulas in trainers/advantages.py."""
    gamma: float = 1.0
    """Discount per turn of the same seat (never per token)."""
    key: list[str] = field(default_factory=lambda: ["game", "agent"])
    """Sample fields that key the normalization statistics and baselines: any of game, agent,
    role, seat, group, prompt. ``agent`` is the seat when the turn's role is ``player``
    (self-play, where every seat plays the same role: seat 0 and seat 1 keep separate
    statistics), otherwise the role (role games: the k solver seats of a proposer/solver game
    share one key). ``prompt`` is the exact prompt the turn was sampled from: in a game whose
    seats see no history of their own (memory ``none``), one information state, so with
    ``ema-turn`` each state keeps its own value baseline and a turn is judged against what its
    state is worth, not against the seat's average (the card's value in poker)."""
    eps: float = 1e-6
    """Added to the standard deviation before dividing."""
    scale_by_std: bool = True
    """Divide by the key's (or group's) std; False keeps only the mean subtraction (Dr. GRPO)."""
    ema_alpha: float = 0.95
    """EMA decay: b <- alpha * b + (1 - alpha) * R, after reading b for the advantages; R is a
    trajectory's return G_1 once per (episode, seat) in ``ema``, each turn's G in ``ema-turn``."""
    whiten: bool = False
    """After the mode's normalization, whiten all advantages of the batch to mean 0, std 1."""

    def __post_init__(self) -> None:
        check_choice("advantage.mode", self.mode, ADVANTAGE_MODES)
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"advantage.gamma must be in [0, 1], got {self.gamma}")
        if not 0.0 <= self.ema_alpha < 1.0:
            raise ValueError(f"advantage.ema_alpha must be in [0, 1), got {self.ema_alpha}")
        allowed = {"game", "agent", "role", "seat", "group", "prompt"}
        if not self.key or not set(self.key) <= allowed:
            raise ValueError(
                f"advantage.key {list(self.key)} must be a non-empty subset of {sorted(allowed)}"
            )


@dataclass
class LossConfig:
    clip_low: float = 0.2
    """PPO ratio lower clip: the ratio is kept above 1 - clip_low."""
    clip_high: float = 0.28
    """PPO ratio upper clip: the ratio is kept below 1 + clip_high (DAPO's clip-higher)."""
    dual_clip: float | None = 3.0
    """Dual-clip constant c > 1: the loss of a negative-advantage token is capped at -c * A.
    None disables it."""
    kl_coef: float = 0.0
    """Weight of the k3 KL estimator to the frozen initial policy; 0 loads no reference."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (subtracted from the loss)."""
    aggregation: str = "token-mean"
    """``token-mean``, ``seq-mean-token-mean`` or ``constant`` (sum over a turn's tokens divided
    by ``norm_constant``, then mean over turns, as Dr. GRPO)."""
    norm_constant: float | None = None
    """Divisor of the ``constant`` aggregation; None uses batch.max_response_tokens (which
    ``arena train`` sets to ``sampling.max_new_tokens``). A learner with neither is refused when
    built."""
    tis_cap: float | None = 2.0
    """Cap C of truncated importance sampling, min(pi_learner / pi_sampler, C) per token;
    None disables the correction."""
    temperature: float = 1.0
    """Sampling temperature the sampler used; learner logits are divided by it so its logprobs
    are comparable with the sampler's."""
    adapter_temperatures: dict[str, float] = field(default_factory=dict)
    """The temperature of each named adapter's turns where it is not ``temperature`` (a run
    whose adapter policies sample at temperatures of their own: ``policies.NAME.sampling``);
    each row is re-scored at the temperature of the adapter that played it."""
    ppo_epochs: int = 1
    """Passes over the batch's mini-batches: ppo_epochs * minibatches optimizer steps per
    learner step. With one step in all, the ratio is 1 and nothing is clipped (the loss is
    REINFORCE with truncated IS); later steps see the moved policy, so the clips act."""
    minibatches: int = 1
    """Optimizer steps per epoch. The batch's turns are shuffled (seeded by ``seed`` and the
    learner step: the same split on every rank and after a resume) into this many near-equal
    mini-batches, kept for every epoch; each is normalized on its own (its turns and tokens)
    and micro-batched by ``batch.micro_batch_tokens``. The old policy of the PPO ratio is the
    one before the batch's first step: mini-batch 0's first pass gives its logprobs for free,
    the others cost one no-grad forward before any step. The LR schedule moves per learner
    step, not per optimizer step. Capped at the number of turns."""

    def __post_init__(self) -> None:
        check_choice("loss.aggregation", self.aggregation, AGGREGATIONS)
        if self.clip_low < 0 or self.clip_high < 0:
            raise ValueError("loss.clip_low and loss.clip_high must be >= 0")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"loss.dual_clip must be > 1 (or None), got {self.dual_clip}")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"loss.tis_cap must be > 0 (or None), got {self.tis_cap}")
        if self.temperature <= 0 or self.ppo_epochs < 1 or self.minibatches < 1:
            raise ValueError(
                "loss.temperature must be > 0, loss.ppo_epochs >= 1 and loss.minibatches >= 1"
            )
        for name, t in self.adapter_temperatures.items():
            if not t > 0:
                raise ValueError(f"loss.adapter_temperatures.{name} must be > 0, got {t}")


@dataclass
class BatchConfig:
    micro_batch_tokens: int = 4096
    """Token budget of one micro-batch, padding included (rows x longest row). Micro-batches
    accumulate gradients: all those of one mini-batch (loss.minibatches) make one step."""
    max_seq_len: int = 2048
    """A turn whose prompt + response is longer is dropped (counted as overlong)."""
    max_response_tokens: int | None = None
    """The sampler's generation limit; a response that reached it was cut off (overlong)."""
    adapter_max_response_tokens: dict[str, int] = field(default_factory=dict)
    """The generation limit of each named adapter's turns where it is not
    ``max_response_tokens`` (``policies.NAME.sampling.max_new_tokens``)."""
    max_batch_samples: int = 0
    """Most turns one step trains on, oldest first, in whole episodes and whole groups (so a
    step takes more when its first episode or group alone is larger); 0 takes every pending
    turn."""
    batch_samples: int = 64
    """The bus actor steps once this many trained turns are pending; 0 steps only on request.
    ``arena train`` sets 0: its trainer requests every step."""
    policy: str | None = None
    """Train only on seats whose assigned policy has this name; None takes every trained seat."""
    known_policies: list[str] = field(default_factory=list)
    """Every policy some learner of the run trains (``arena train`` fills it in where named
    policies have learners of their own). An episode with a trained seat of any other policy is
    rejected as a bad record, counted and logged: no learner would train that seat, and none
    must train it silently as its own. Empty: not checked."""
    max_staleness: int = 4
    """A turn generated more than this many versions before the learner's is stale. ``arena
    train`` in async mode paces its rollouts so that none is; the learner still drops (or
    down-weights) any that arrive, e.g. from actors started by hand that it does not pace."""
    stale_mode: str = "reject"
    """``reject`` drops stale turns; ``downweight`` scales their loss weight by
    stale_decay ** excess, excess = learner version - turn's policy_version - max_staleness
    (max_staleness 4, decay 0.5: a turn 6 versions old weighs 0.25)."""
    stale_decay: float = 0.5
    """Loss weight factor per version beyond max_staleness, in ``downweight`` mode."""
    filter_zero_advantage: bool = True
    """Leave out of the passes turns whose advantage is 0, |A| <= 1e-8 (no signal, only cost);
    they still count in the loss's normalizer (trainers/filters.py)."""
    filter_void: bool = False
    """Drop turns whose text did not parse to a valid action (SimpleTIR's void turns)."""
    filter_overlong: bool = True
    """Drop turns whose response hit max_response_tokens (cut off, DAPO's overlong filter)."""
    shared_prefix: bool = True
    """Compute a prompt once per micro-batch for every sequence that continues it: the legal
    replies of a choice turn, the samples of one GRPO group that saw the same prompt. The
    gradient is the same as with one row per sequence (``false``), at a fraction of the tokens."""
    dedupe_window: int = 100_000
    """How many recent episode ids are remembered to drop duplicates (kept in checkpoints)."""

    def __post_init__(self) -> None:
        check_choice("batch.stale_mode", self.stale_mode, STALE_MODES)
        if self.max_seq_len > self.micro_batch_tokens:
            raise ValueError(
                f"batch.max_seq_len ({self.max_seq_len}) must fit batch.micro_batch_tokens "
                f"({self.micro_batch_tokens})"
            )
        if self.max_staleness < 0 or not 0.0 < self.stale_decay <= 1.0:
            raise ValueError("batch.max_staleness must be >= 0 and batch.stale_decay in (0, 1]")


@dataclass
class OptimConfig:
    lr: float = 1e-6
    """Peak learning rate of AdamW."""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """AdamW betas."""
    eps: float = 1e-8
    """AdamW epsilon."""
    weight_decay: float = 0.0
    """Decoupled weight decay, applied to matrices only (not norms or biases)."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this; 0 disables clipping (the norm is still reported)."""
    schedule: str = "constant"
    """LR after warmup: ``constant``, ``linear`` or ``cosine`` decay to min_lr_ratio * lr."""
    warmup_steps: int = 0
    """Linear warmup from lr / warmup_steps to lr (step k of the warmup: lr * (k + 1) /
    warmup_steps); a decay starts after it (trainers/optim.py:learning_rate)."""
    total_steps: int | None = None
    """The step at which the linear or cosine decay reaches its floor, in learner steps (the
    decay spans total_steps - warmup_steps steps). None: the run's ``steps``
    (``arena train`` fills it in); a learner built on its own with a decaying schedule needs it."""
    min_lr_ratio: float = 0.0
    """Floor of the decay as a fraction of lr."""

    def describe(self) -> str:
        """The schedule in a few words, e.g. ``2e-05 (cosine to 2e-06 over 24 steps)``."""
        parts = [f"{self.warmup_steps} warm-up steps"] if self.warmup_steps else []
        if self.schedule != "constant":
            floor = self.lr * self.min_lr_ratio
            length = f"{self.total_steps} steps" if self.total_steps else "total_steps (unset)"
            parts.insert(0, f"{self.schedule} to {floor:g} over {length}")
        return f"{self.lr:g} ({', '.join(parts)})" if parts else f"{self.lr:g}"

    def __post_init__(self) -> None:
        check_choice("optim.schedule", self.schedule, SCHEDULES)
        if len(self.betas) != 2:
            raise ValueError(f"optim.betas needs two values, got {list(self.betas)}")


@dataclass
class LoRAConfig:
    enabled: bool = False
    """Train LoRA adapters (peft) instead of every weight."""
    r: int = DEFAULT_RANK
    """Adapter rank (default: the adapters' own, ``arena.models.lora``)."""
    alpha: int = DEFAULT_ALPHA
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    """Dropout on the adapter input."""
    target_modules: list[str] = field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))
    """Module names that get adapters (default: every projection,
    ``arena.models.lora.DEFAULT_TARGET_MODULES``)."""
    serve: str = "merged"
    """What a weight update carries: ``merged``, every weight with the adapter merged in (any
    server takes it; a bf16 server rounds a small delta away), or ``adapter``, the adapter alone
    as one float32 buffer (``lora_adapter.shared-lora``), which an ``hf`` server applies
    unmerged on its frozen base (``default_adapter``). ``arena train`` picks ``adapter`` for the
    ``hf`` backend. Checkpoints then also hold it as a peft directory,
    ``adapters/shared-lora``."""


@dataclass
class PerStateConfig:
    enabled: bool = False
    """Replace the optimizer's steps by the per-state step (trainers/per_state.py): each distinct
    state of the batch's choice turns moves its legal policy by its own advantages and, to first
    order, no other state's. Every trained turn must be a choice turn; one process only."""
    eta: float = 0.05
    """Log-odds a reply gains over the state's first reply per unit of advantage between them."""
    max_move: float = 0.5
    """Cap on any reply's target move in log-odds, whatever its advantage."""
    damping: float = 1e-4
    """Tikhonov damping of the solve, as a fraction of the Gram matrix's mean diagonal."""
    min_visits: int = 2
    """A state the batch visits fewer times is left alone this step: one return says little of
    how its replies compare."""
    max_jacobian_bytes: int = 4 << 30
    """Memory for the rows' gradients (rows x trained parameters x 4 bytes): a batch that needs
    more is refused, with both counts, before the first backward."""

    def __post_init__(self) -> None:
        if self.eta <= 0 or self.max_move <= 0 or self.damping <= 0 or self.min_visits < 1:
            raise ValueError(
                "per_state.eta, per_state.max_move and per_state.damping must be > 0 and "
                "per_state.min_visits >= 1"
            )


@dataclass
class CheckpointConfig:
    dir: str | None = None
    """Where checkpoints go (one step-NNNNNNNN directory each); None saves none."""
    every: int = 100
    """Save every this many optimizer steps."""
    keep: int = 3
    """How many recent checkpoints to keep; older ones are deleted after a save."""
    resume: bool = True
    """At start, load the last complete checkpoint in ``dir`` if there is one."""


@dataclass
class DistributedConfig:
    strategy: str = "ddp"
    """Under torchrun: ``ddp`` (replicated weights) or ``fsdp2`` (sharded, torch >= 2.6)."""
    backend: str | None = None
    """Process-group backend; None picks nccl with CUDA, gloo otherwise."""

    def __post_init__(self) -> None:
        check_choice("distributed.strategy", self.strategy, STRATEGIES)


@dataclass
class LearnerConfig:
    name: str = "main"
    """The policy this learner trains; weights go out on topic ``weights.<name>``."""
    service: str = "learner"
    """The bus service it offers (episodes, steps, status). A run whose named policies have
    models of their own starts one more learner per trained one, as ``learner:<policy>``."""
    model: str = "tiny"
    """Model spec for arena.models.load_model: ``tiny``, ``smollm2-135m`` or an HF directory."""
    dtype: str = "float32"
    """Parameter dtype (float32 or bfloat16)."""
    device: str = "auto"
    """``auto`` (CUDA when there is one), ``cpu`` or ``cuda``."""
    seed: int = 0
    """Seeds torch, numpy and python at start (before a resume restores their states)."""
    sparse_logits: bool = True
    """Apply the LM head only where the loss needs it (response tokens). Turn off for models
    whose forward post-processes logits (e.g. soft-capping)."""
    autocast: str | None = None
    """``bfloat16``: mixed precision for forward and backward, weights and optimizer state stay
    in ``dtype``. ``auto``: bfloat16 where this machine computes it measurably faster than
    float32 (a GPU with bf16, a CPU with AVX512-BF16 or AMX), none elsewhere (emulated bf16 is
    far slower). None runs in ``dtype``. (float16 would need loss scaling; not offered.) In bf16
    a fresh run first rounds the float32 weights to bf16 (``trainers/precision.py``: weights
    halfway between two bf16 values would otherwise move a whole bf16 step at any update)."""
    sampled_in: str | None = None
    """The dtype the inference service that samples for this learner holds its weights in
    (``arena train`` fills it in from ``inference.dtype``). ``bfloat16`` makes a fresh run round
    the float32 weights to bf16 first, as bf16 ``autocast`` does, so that the service's bf16 copy
    follows the updates rather than jumping at the ties. ``auto``: what ``dtype: auto`` means on
    this learner's device (``arena train`` leaves it so when the inference actors run elsewhere,
    on hosts of the learner's kind). None: only ``autocast`` decides."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more compute."""
    bucket_bytes: int = 64 << 20
    """Size of one weights bucket on the bus."""
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """The shared policy's peft adapter (``enabled``), or the shape of the named policies'
    adapters (``adapters``)."""
    adapters: dict[str, str] = field(default_factory=dict)
    """Named policies: one LoRA adapter each on the frozen base, name -> the peft directory it
    starts from ("" starts fresh, the base exactly, in ``lora``'s shape). ``arena train`` fills
    it in from the run's ``policies`` (trainers/adapters.py). Empty: the base itself trains."""
    per_state: PerStateConfig = field(default_factory=PerStateConfig)
    """The per-state step in place of the optimizer's (choice turns only)."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)

    def __post_init__(self) -> None:
        if self.autocast not in (None, "bfloat16", "auto"):
            raise ValueError(f"autocast = {self.autocast!r}; expected null, bfloat16 or auto")
        if self.sampled_in not in (None, "float32", "bfloat16", "float16", "auto"):
            raise ValueError(
                f"sampled_in = {self.sampled_in!r}; expected null, float32, bfloat16, float16 "
                "or auto"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LearnerConfig:
        """Build from a nested mapping over the defaults; an unknown key is a
        :class:`~arena.core.errors.ConfigError` naming the nearest valid one."""
        return from_dict(cls, data, "learner")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
