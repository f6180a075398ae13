"""What each computing process of a run gets from this machine: torch threads and a device."""

from __future__ import annotations

import os

from arena.run.config import RunConfig


def cpu_threads(config: RunConfig, cores: int | None = None) -> dict[str, int]:
    """Torch threads per computing process (``inference`` actors and the ``learner``), or an
    empty dict when the environment's ``OMP_NUM_THREADS`` decides (see ``cpu_threads``)."""
    if config.cpu_threads:
        return {"inference": config.cpu_threads, "learner": config.cpu_threads}
    if os.environ.get("OMP_NUM_THREADS"):
        return {}
    cores = cores or len(os.sched_getaffinity(0))
    generating = config.inference.actors + (config.opponents.mode == "population")
    if config.mode == "async":  # generation and training run at once (here: those started here)
        share = max(1, cores // max(1, generating + config.start_learner))
        return {"inference": share, "learner": share}
    return {"inference": max(1, cores // max(1, generating)), "learner": cores}


def device_for(device: str) -> str:
    """The device a child process is told to use: ``auto`` is resolved here, once, so every
    inference actor of a run agrees (:func:`arena.models.resolve_device`)."""
    from arena.models import resolve_device  # imports torch: not needed for --dry-run

    return str(resolve_device(device))
