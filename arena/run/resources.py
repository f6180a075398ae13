"""What each computing process of a run gets from this machine: torch threads and a device."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from arena.run.bases import own_bases, pooled_bases, trained_bases
from arena.run.config import RunConfig


def cpu_threads(config: RunConfig, cores: int | None = None) -> dict[str, int]:
    """Torch threads per computing process (``inference`` actors and the ``learner``), or an
    empty dict when the environment's ``OMP_NUM_THREADS`` decides (see ``cpu_threads``)."""
    if config.cpu_threads:
        return {"inference": config.cpu_threads, "learner": config.cpu_threads}
    if config.launcher == "ray":  # the CPUs Ray reserves for its kind, whatever this host has
        from arena.run.ray_launcher import threads_for

        r = config.ray.resources
        return {
            "inference": int(threads_for(r.inference, 0)),
            "learner": int(threads_for(r.learner, 0)),
        }
    if os.environ.get("OMP_NUM_THREADS"):
        return {}
    cores = cores or len(os.sched_getaffinity(0))
    # policies on models of their own: an inference actor each, generating beside the run's,
    # and a learner each (unless frozen), stepping with the run's (arena/run/bases.py); with
    # inference.actors 0 the run starts no inference actor (arena/run/inference_actors.py)
    named = (
        (config.opponents.mode == "population")
        + len(own_bases(config.play))
        + len(pooled_bases(config.play))
    )
    generating = (config.inference.actors + named) * (config.inference.actors > 0)
    learners = (1 + len(trained_bases(config.play))) * config.start_learner
    if config.mode == "async":  # generation and training run at once (here: those started here)
        share = core_share(generating + learners, cores)
        return {"inference": share, "learner": share}
    return {"inference": core_share(generating, cores), "learner": core_share(learners, cores)}


def core_share(processes: int, cores: int | None = None) -> int:
    """Torch threads for each of ``processes`` that compute at once on this machine's cores
    (or ``cores``): an equal share rounded down, at least 1 (``max(1, cores // processes)``:
    3 processes on 8 cores get 2 threads each, 3 on 2 cores 1 each). Oversubscribed cores cost
    more than idle ones: an OpenMP thread spins at every barrier for a thread the scheduler has
    put aside."""
    cores = cores or len(os.sched_getaffinity(0))
    return max(1, cores // max(1, processes))


def threads_env(processes: int, device: str) -> dict[str, str]:
    """The ``OMP_NUM_THREADS`` of each of ``processes`` CPU processes that compute at once
    (:func:`core_share`); nothing on a GPU, or where the environment's ``OMP_NUM_THREADS``
    decides."""
    if device != "cpu" or os.environ.get("OMP_NUM_THREADS"):
        return {}
    return {"OMP_NUM_THREADS": str(core_share(processes))}


def device_for(device: str) -> str:
    """The device a child process is told to use: ``auto`` is resolved here, once, so every
    inference actor of a run agrees (:func:`arena.models.resolve_device`). The CPU is named
    without importing torch (3 s of CPU for a process that holds no model): ``cpu`` itself, and
    ``auto`` where the installed torch is a CPU-only build."""
    if device == "cpu" or (device == "auto" and cpu_only_torch()):
        return "cpu"
    from arena.models import resolve_device  # imports torch

    return str(resolve_device(device))


def cpu_only_torch() -> bool:
    """Whether the installed torch was built for no GPU (its ``torch/version.py`` names neither
    a CUDA nor a ROCm toolkit), so that ``torch.cuda.is_available()`` is False: read from the
    file, not by importing torch. False when in doubt (torch then answers itself)."""
    if "torch" in sys.modules:
        return not sys.modules["torch"].cuda.is_available()
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    try:
        text = (Path(spec.origin).parent / "version.py").read_text()
    except OSError:
        return False
    return all(
        re.search(rf"^{name}(: Optional\[str\])? = None$", text, re.MULTILINE)
        for name in ("cuda", "hip")
    )
