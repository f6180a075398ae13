"""The receiving end of bench/gpu_check.py's same-GPU weight sync: a served model of one shape
on this host's GPU, taking CUDA IPC updates (:mod:`arena.weights.cuda_ipc`) as an inference
actor does (a :class:`~arena.weights.receiver.WeightReceiver` applying to an
:class:`~arena.policies.hf.HFPolicy`).

Protocol on stdin/stdout: it prints ``{"device": <device id>}`` once ready; then for each update
reads a 4-byte little-endian length and that many bytes of msgpack (one ``weights`` bucket
body, as the bus carries it), applies it, and prints ``{"version", "transport"}`` or
``{"error"}``. It ends at end of input.

Usage (by gpu_check only): python3 bench/ipc_sync.py SHAPE full|adapter RANK
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

import msgpack
import torch
from shapes import random_model

from arena.models.adapter_shape import DEFAULT_TARGET_MODULES, AdapterShape
from arena.models.lora import add_adapters
from arena.policies.hf import HFPolicy
from arena.weights.cuda_ipc import device_id
from arena.weights.receiver import WeightReceiver


def main() -> None:
    shape, case, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model, tokenizer = random_model(shape, device="cuda")
    policy = HFPolicy(model, tokenizer)
    if case == "adapter":
        add_adapters(model, ["solver"], AdapterShape(r, 2.0 * r, DEFAULT_TARGET_MODULES))
    outcome: dict[str, Any] = {}

    def deliver(version: int, state: dict[str, torch.Tensor], transport: str) -> None:
        policy.update_weights(state, version)
        outcome.update(version=version, transport=transport)

    def refuse(version: int, reason: str, transport: str) -> None:
        outcome.update(version=version, transport=transport, error=reason)

    receiver = WeightReceiver(
        SimpleNamespace(name="ipc-sync"),  # the bus actor; only its name is read on this path
        "gpu-check",
        policy,
        deliver=deliver,
        refuse=refuse,
        device=device_id("cuda"),
    )
    print(json.dumps({"device": device_id("cuda")}), flush=True)
    while header := sys.stdin.buffer.read(4):
        body = msgpack.unpackb(sys.stdin.buffer.read(int.from_bytes(header, "little")))
        outcome.clear()
        receiver.on_weights(SimpleNamespace(body=body, src="gpu-check"))
        torch.cuda.synchronize()
        print(json.dumps(outcome or {"error": "nothing delivered"}), flush=True)


if __name__ == "__main__":
    main()
