"""The memory a run's models need, per base, against the host's: ``arena train`` refuses a plan
that does not fit before anything starts, naming the policy.

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

PLANNED_CONTEXT = 1024
"""Tokens per in-flight sequence the KV estimate assumes (prompt and reply)."""


@dataclass
class BasePlan:
    """One base's bytes, all its processes together."""

    policy: str
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


def memory_plan(config: RunConfig) -> list[BasePlan]:
    """Each base's bytes: the run's shared one (its learner trains it or its adapters), then
    each named policy's own."""
    c = config
    infer_bytes = 2 if c.inference.dtype in ("bfloat16", "float16") else 4
    lora = c.learner.lora
    adapters = [n for n, s in c.policies.items() if not s.own_base]
    shared_trained: tuple[int, list[str]] | None = None  # (rank, targets) for adapters
    if adapters or lora.enabled:
        shared_trained = (lora.r, list(lora.target_modules) * max(1, len(adapters)))
    # the population's pool actors hold a copy each (arena/run/population.py)
    pool = c.opponents.mode == "population"
    bases = [(c.learner.name, c.model, c.inference.actors + pool, True, shared_trained)]
    pooled = pooled_bases(c.play)
    for name, spec in own_bases(c.play).items():
        shaped = lora_of(spec, lora, f"policies.{name}")
        on = (shaped.r, list(shaped.target_modules)) if shaped.enabled else None
        bases.append((name, str(spec.model), 1 + (name in pooled), spec.train, on))
    out = []
    for policy, model, actors, trains, adapter in bases:
        shape = model_shape(model)
        if shape is None:
            out.append(BasePlan(policy, model, None))
            continue
        params = count_params(shape)
        trained = params if adapter is None else adapter_params(shape, *adapter)
        per_actor_kv = c.inference.prefix_cache_mb * 2**20 + (
            c.inference.max_batch * PLANNED_CONTEXT * kv_bytes_per_token(shape, infer_bytes)
        )
        out.append(
            BasePlan(
                policy,
                model,
                params,
                weights=actors * params * infer_bytes + (params * 4 if trains else 0),
                optimizer=12 * trained if trains else 0,
                kv_cache=actors * per_actor_kv,
            )
        )
    return out


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
