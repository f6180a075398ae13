"""The memory a run's models need, per base, against the host's: ``arena train`` refuses a plan
that does not fit before anything starts, naming the policy. Only the processes it starts on
this host count against this host (:func:`memory_plan`); those it waits for from elsewhere
(``inference.actors=0``, ``start_learner=false``, more than it starts) are listed per process
(:func:`elsewhere_lines`), to size the hosts that start them.

Each base (the run's shared ``model``, and each named policy's own) costs, in bytes:

- **weights**, once per inference actor serving it (4 bytes a parameter, 2 where
  ``inference.dtype`` says bfloat16 or float16) and once in its learner (float32);
- **optimizer**, in its learner: a float32 gradient and AdamW's two float32 moments per trained
  parameter (12 bytes): every parameter for full weights, the adapter's for LoRA;
- **KV cache**, per inference actor: the prefix cache's bound (``inference.prefix_cache_mb``)
  plus ``max_batch`` sequences of :data:`PLANNED_CONTEXT` tokens.

Parameters are counted from the model's shape (a Llama-style decoder: embeddings, attention with
grouped key/value heads, gated MLP, norms), read from ``config.json`` for a directory and known
for the embedded ids, without importing torch. Activations are not counted: the plan is a floor,
and a run that fits it may still need more.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from arena.core.errors import ConfigError
from arena.models.specs import SHAPES
from arena.run.bases import lora_of, own_bases, pooled_bases
from arena.run.config import RunConfig
from arena.run.inference_actors import MAIN_ACTOR, pool_actor

PLANNED_CONTEXT = 1024
"""Tokens per in-flight sequence the KV estimate assumes (prompt and reply)."""


@dataclass
class BasePlan:
    """One base's bytes, all its processes together."""

    policy: str
    """The base's policy (the run's ``learner.name`` for the shared one)."""
    model: str
    params: int | None
    weights: int = 0
    optimizer: int = 0
    kv_cache: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.optimizer + self.kv_cache

    def line(self) -> str:
        if self.params is None:
            return f"{self.policy:<10} {self.model}: shape unknown, not counted"
        return (
            f"{self.policy:<10} {self.model}: {self.params / 1e6:.1f}M params; weights "
            f"{gib(self.weights)}, optimizer {gib(self.optimizer)}, KV cache "
            f"{gib(self.kv_cache)}; total {gib(self.total)}"
        )


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def model_shape(spec: str) -> dict[str, int | bool] | None:
    """The decoder's shape: known for the embedded ids, else from ``<dir>/config.json``."""
    if spec in SHAPES:
        return SHAPES[spec]
    path = Path(spec) / "config.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
        shape = {k: int(data[k]) for k in keys}
    except (ValueError, KeyError, TypeError):
        return None
    shape["num_attention_heads"] = int(data.get("num_attention_heads", 1))
    shape["num_key_value_heads"] = int(
        data.get("num_key_value_heads", shape["num_attention_heads"])
    )
    shape["tie_word_embeddings"] = bool(data.get("tie_word_embeddings", False))
    return shape


def layer_widths(shape: dict[str, int | bool]) -> dict[str, tuple[int, int]]:
    """(in, out) of each projection of one layer."""
    h, inter = int(shape["hidden_size"]), int(shape["intermediate_size"])
    kv = h // int(shape["num_attention_heads"]) * int(shape["num_key_value_heads"])
    return {
        "q_proj": (h, h),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (h, h),
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }


def count_params(shape: dict[str, int | bool]) -> int:
    """Embeddings (twice unless tied), every layer's projections and two norms, the last norm."""
    h, vocab = int(shape["hidden_size"]), int(shape["vocab_size"])
    per_layer = sum(i * o for i, o in layer_widths(shape).values()) + 2 * h
    heads = 1 if shape["tie_word_embeddings"] else 2
    return heads * vocab * h + int(shape["num_hidden_layers"]) * per_layer + h


def adapter_params(shape: dict[str, int | bool], r: int, targets: list[str]) -> int:
    """LoRA's A and B on each targeted projection of every layer."""
    widths = layer_widths(shape)
    per_layer = sum(r * (widths[t][0] + widths[t][1]) for t in targets if t in widths)
    return int(shape["num_hidden_layers"]) * per_layer


def kv_bytes_per_token(shape: dict[str, int | bool], dtype_bytes: int) -> int:
    h, heads = int(shape["hidden_size"]), int(shape["num_attention_heads"])
    kv = h // heads * int(shape["num_key_value_heads"])
    return 2 * int(shape["num_hidden_layers"]) * kv * dtype_bytes


@dataclass(kw_only=True)
class ProcessPlan(BasePlan):
    """One process's bytes: an inference actor or a learner of one base."""

    name: str
    """``inference-0``, ``inference-pool``, ``learner-responder``..."""
    here: bool = True
    """Started by ``arena train`` on this host; False: started by hand (or by a scheduler)
    elsewhere, which the run waits for."""


def process_plans(config: RunConfig) -> list[ProcessPlan]:
    """Every process of the run that holds a model, with its bytes and whether this host starts
    it: the shared base's inference actors (those the run waits for beyond its own count are
    elsewhere), its pool actor and its learner, then each named policy's own. With
    ``inference.actors`` 0 no inference actor is started here, with ``start_learner`` false no
    learner (:mod:`arena.run.inference_actors`, :mod:`arena.run.processes`)."""
    c = config
    infer_bytes = 2 if c.inference.dtype in ("bfloat16", "float16") else 4
    lora = c.learner.lora
    adapters = [n for n, s in c.policies.items() if not s.own_base]
    shared_trained: tuple[int, list[str]] | None = None  # (rank, targets) for adapters
    if adapters or lora.enabled:
        shared_trained = (lora.r, list(lora.target_modules) * max(1, len(adapters)))
    started = c.inference.actors > 0
    main = [f"inference-{i}" for i in range(max(c.inference.actors, c.awaited()[1]))]
    # the population's pool actors hold a copy each (arena/run/population.py)
    pools = [pool_actor()] if c.opponents.mode == "population" else []
    bases = [(c.learner.name, c.model, main + pools, "learner", shared_trained)]
    pooled = pooled_bases(c.play)
    for name, spec in own_bases(c.play).items():
        shaped = lora_of(spec, lora, f"policies.{name}")
        on = (shaped.r, list(shaped.target_modules)) if shaped.enabled else None
        actors = [f"inference-{name}", *([pool_actor(name)] if name in pooled else [])]
        bases.append((name, str(spec.model), actors, f"learner-{name}" if spec.train else "", on))
    out = []
    for policy, model, actors, learner, adapter in bases:
        shape = model_shape(model)
        params = None if shape is None else count_params(shape)
        for actor in actors:
            here = started and (actor not in main or main.index(actor) < c.inference.actors)
            plan = ProcessPlan(policy, model, params, name=actor, here=here)
            if shape is not None and params is not None:
                plan.weights = params * infer_bytes
                plan.kv_cache = c.inference.prefix_cache_mb * 2**20 + (
                    c.inference.max_batch * PLANNED_CONTEXT * kv_bytes_per_token(shape, infer_bytes)
                )
            out.append(plan)
        if learner:
            plan = ProcessPlan(policy, model, params, name=learner, here=c.start_learner)
            if shape is not None and params is not None:
                trained = params if adapter is None else adapter_params(shape, *adapter)
                plan.weights, plan.optimizer = params * 4, 12 * trained
            out.append(plan)
    return out


def memory_plan(config: RunConfig) -> list[BasePlan]:
    """Each base's bytes on this host, all the processes of it that ``arena train`` starts
    here together: the run's shared one (its learner trains it or its adapters), then each
    named policy's own; a base none of whose processes start here is left out."""
    out: dict[str, BasePlan] = {}
    for p in process_plans(config):
        if not p.here:
            continue
        base = out.setdefault(p.policy, BasePlan(p.policy, p.model, p.params))
        base.weights += p.weights
        base.optimizer += p.optimizer
        base.kv_cache += p.kv_cache
    return list(out.values())


def elsewhere_lines(config: RunConfig) -> list[str]:
    """What each process the run waits for but does not start needs on its own host, one line
    per process (the shared base's ``inference-<N>`` in one line, each needing the same)."""
    lines: list[str] = []
    away = [p for p in process_plans(config) if not p.here]
    main = [p for p in away if MAIN_ACTOR.fullmatch(p.name)]
    for p in away:
        if p in main[1:]:
            continue
        name, each = p.name, ""
        if p in main and len(main) > 1:
            name, each = f"{main[0].name}..{main[-1].name.removeprefix('inference-')}", " each"
        if p.params is None:
            lines.append(f"{name:<24} {p.policy} {p.model}: shape unknown, not counted")
            continue
        parts = [f"weights {gib(p.weights)}"]
        parts += [f"optimizer {gib(p.optimizer)}"] if p.optimizer else []
        parts += [f"KV cache {gib(p.kv_cache)}"] if p.kv_cache else []
        lines.append(f"{name:<24} {p.policy} {p.model}: {gib(p.total)}{each} ({', '.join(parts)})")
    return lines


def host_memory() -> int | None:
    """This host's physical memory in bytes (None where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(plans: list[BasePlan], host: int | None) -> None:
    """A config error, naming the largest base's policy, when the bases together need more
    memory than the host has."""
    total = sum(p.total for p in plans)
    if host is None or total <= host:
        return
    largest = max(plans, key=lambda p: p.total)
    raise ConfigError(
        f"the run's models need {gib(total)}, more than this host's {gib(host)}; the largest is "
        f"policy {largest.policy} ({largest.model}: {gib(largest.total)}). Give it a smaller "
        "model, a lora section, fewer inference actors or a smaller inference.prefix_cache_mb, "
        "or place its processes on other hosts (docs/deploy.md)"
    )
