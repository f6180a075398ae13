"""Running the learner on several devices: torchrun ranks, DDP or FSDP2, and batch sharing.

Under ``torchrun`` (``WORLD_SIZE > 1``) every rank builds the same learner. Rank 0 owns the
input: it receives episodes and broadcasts each step's turns to the other ranks, which call
the same collective :meth:`~trainers.learner.Learner.step`. Turns travel as the bus's msgpack
encoding (arrays as raw bytes; no pickle, so no ``broadcast_object_list``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from arena.bus.codec import decode, encode
from trainers.config import DistributedConfig


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(config: DistributedConfig, device: torch.device) -> DistInfo:
    """Join the process group torchrun describes (env://); a single process needs none."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        backend = config.backend or ("nccl" if device.type == "cuda" else "gloo")
        dist.init_process_group(backend=backend)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        torch.cuda.set_device(local_rank)
    return DistInfo(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=local_rank)


def local_device(device: torch.device, info: DistInfo) -> torch.device:
    """cuda:<local_rank> for CUDA ranks; the device unchanged otherwise."""
    if device.type == "cuda" and info.enabled:
        return torch.device("cuda", info.local_rank)
    return device


def wrap(module: nn.Module, strategy: str, info: DistInfo, device: torch.device) -> nn.Module:
    """DDP or FSDP2 around the learner's root module; unchanged for a single process."""
    if not info.enabled:
        return module
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(module, device_ids=ids)
    from torch.distributed.fsdp import fully_shard  # torch >= 2.6

    # Shard each decoder layer, then the root (embeddings, norm, head) last.
    for sub in module.modules():
        if sub is not module and type(sub).__name__.endswith("DecoderLayer"):
            fully_shard(sub)
    fully_shard(module)
    return module


def sync_gradients(module: nn.Module, enabled: bool) -> None:
    """Turn the gradient all-reduce of the next backward on or off (accumulation)."""
    setter = getattr(module, "set_requires_gradient_sync", None)  # FSDP2
    if callable(setter):
        setter(enabled)
    elif hasattr(module, "require_backward_grad_sync"):  # DDP
        module.require_backward_grad_sync = enabled


def all_reduce_max(value: float, info: DistInfo, device: torch.device) -> float:
    if not info.enabled:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def all_reduce_sum(
    values: dict[str, float], info: DistInfo, device: torch.device
) -> dict[str, float]:
    if not info.enabled or not values:
        return values
    names = sorted(values)
    tensor = torch.tensor([values[n] for n in names], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return dict(zip(names, tensor.tolist(), strict=True))


def broadcast_body(body: Any, info: DistInfo, device: torch.device) -> Any:
    """Rank 0's ``body`` (msgpack types and numpy arrays) on every rank."""
    if not info.enabled:
        return body
    comm_device = device if device.type == "cuda" else torch.device("cpu")
    if info.is_main:
        _, frames = encode("control", body, src="learner", topic="learner.batch")
        parts = [bytes(f) for f in frames]
        sizes = torch.tensor([len(p) for p in parts], dtype=torch.int64)
        count = torch.tensor([len(parts)], dtype=torch.int64, device=comm_device)
    else:
        count = torch.zeros(1, dtype=torch.int64, device=comm_device)
    dist.broadcast(count, src=0)
    if not info.is_main:
        sizes = torch.zeros(int(count.item()), dtype=torch.int64)
    sizes = sizes.to(comm_device)
    dist.broadcast(sizes, src=0)
    total = int(sizes.sum().item())
    if info.is_main:
        payload = torch.from_numpy(np.frombuffer(b"".join(parts), dtype=np.uint8).copy()).to(
            comm_device
        )
    else:
        payload = torch.empty(total, dtype=torch.uint8, device=comm_device)
    dist.broadcast(payload, src=0)
    if info.is_main:
        return body
    data = payload.cpu().numpy().tobytes()
    offsets = np.cumsum([0, *sizes.tolist()])
    frames = [data[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    return decode(frames).body


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()
