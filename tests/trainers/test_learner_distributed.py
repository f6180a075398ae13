"""Two learner ranks on gloo (CPU): the same code path as torchrun on GPUs.

Rank 0 takes the episodes and leads; rank 1 follows. After the updates both ranks must hold
identical parameters, equal to those of a single process trained on the same turns (the
aggregation weights count the global batch, so sharding changes nothing but float order). With
several mini-batches and epochs per step, every rank splits the batch alike and takes the same
optimizer steps (trainers/update.py).

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_learner_distributed.py``.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from synthetic import two_seat_episodes

from trainers.config import LearnerConfig
from trainers.learner import Learner

STEPS = 2


ONE_STEP: dict[str, int] = {}
FOUR_STEPS = {"minibatches": 2, "ppo_epochs": 2}
"""The ``loss`` sections: one optimizer step per learner step, or 2 mini-batches x 2 epochs."""


def learner_config(strategy: str, loss: dict[str, int]) -> LearnerConfig:
    return LearnerConfig.from_dict(
        {
            "model": "tiny",
            "device": "cpu",
            "optim": {"lr": 1e-3},
            "loss": loss,
            "batch": {"micro_batch_tokens": 48, "max_seq_len": 48},
            "distributed": {"strategy": strategy, "backend": "gloo"},
        }
    )


def run_rank(rank: int, world: int, port: int, strategy: str, loss: dict, out: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    learner = Learner(learner_config(strategy, loss))
    assert learner.dist.world == world
    optimizer_steps = loss.get("minibatches", 1) * loss.get("ppo_epochs", 1)
    if rank == 0:
        for i in range(STEPS):
            learner.add_episodes(two_seat_episodes(3, start=10 * i))
            metrics = learner.step()
            assert metrics is not None and metrics["version"] == i + 1
            assert metrics["optimizer_steps"] == optimizer_steps
        weights = learner.export_weights()
        learner.close()
    else:
        learner.follow()
        weights = learner.export_weights() if strategy == "ddp" else None
    assert learner.state.step == STEPS
    if weights is not None:
        save_file(
            {k: v.contiguous() for k, v in weights.items() if k != "lm_head.weight"},
            f"{out}/rank{rank}.safetensors",
        )
    dist.barrier()
    dist.destroy_process_group()


# The ranks are forked from one server process that imported torch, the learner and this module
# once for all four tests (spawned, each of the eight ranks imported them itself: 8 s apiece).
multiprocessing.get_context("forkserver").set_forkserver_preload(
    ["torch", "trainers.learner", run_rank.__module__]
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("loss", [ONE_STEP, FOUR_STEPS], ids=["one-step", "minibatches"])
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_gloo_ranks_match_each_other_and_one_process(
    tmp_path: Path, strategy: str, loss: dict[str, int], monkeypatch
) -> None:
    args = (2, free_port(), strategy, loss, str(tmp_path))
    mp.start_processes(run_rank, args=args, nprocs=2, join=True, start_method="forkserver")
    rank0 = load_file(str(tmp_path / "rank0.safetensors"))
    if strategy == "ddp":  # every DDP rank holds full weights: they must be identical
        rank1 = load_file(str(tmp_path / "rank1.safetensors"))
        for name, tensor in rank0.items():
            assert torch.equal(tensor, rank1[name]), name
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    single = Learner(learner_config(strategy, loss))
    assert not single.dist.enabled
    for i in range(STEPS):
        single.add_episodes(two_seat_episodes(3, start=10 * i))
        single.step()
    reference = single.export_weights()
    for name, tensor in rank0.items():
        assert torch.allclose(tensor, reference[name], atol=1e-5), name
