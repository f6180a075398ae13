"""Where ``launcher=ray`` places a run's processes, and what Ray reserves for each kind.

Ray only places the ``arena`` processes (its actors host them); they still talk over Arena's
bus (:mod:`arena.run.ray_launcher`). The ``ray`` section of :class:`arena.run.config.RunConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from arena.core.errors import ConfigError
from arena.core.process import PROCESS_KINDS

KINDS = tuple(k for k in PROCESS_KINDS if k != "train")
"""The kinds of process Ray places, each with its own resource request: every kind but the
coordinator (``arena train`` asks Ray to place the others; it is not placed itself)."""


@dataclass
class RayResources:
    """What Ray reserves for each process of one kind (its ``ray.remote`` options)."""

    num_cpus: float = 1.0
    """Logical CPUs (Ray's ``num_cpus``; fractions allowed). The process also gets this many
    torch threads (``OMP_NUM_THREADS``, at least 1) unless ``cpu_threads`` is set."""
    num_gpus: float = 0.0
    """GPUs (Ray's ``num_gpus``; a fraction shares one). Ray sets ``CUDA_VISIBLE_DEVICES`` of the
    process to the GPUs it was given: give the inference actors and the learner GPUs when their
    ``device`` is ``cuda``."""


@dataclass
class RayResourcesConfig:
    """Resource requests per kind of process under ``launcher=ray``."""

    broker: RayResources = field(default_factory=RayResources)
    """The run's own broker (``bus.address`` unset); it runs on the node of ``arena train``."""
    inference: RayResources = field(default_factory=RayResources)
    """Each inference actor (``inference-<i>``, and ``inference-pool[-<policy>]`` in population mode)."""
    learner: RayResources = field(default_factory=RayResources)
    """The learner (when ``start_learner``)."""
    rollout: RayResources = field(default_factory=RayResources)
    """Each rollout actor."""


@dataclass
class RayConfig:
    """Where and how ``launcher=ray`` places the run's processes. Ray only places (and its
    actors host) the ``arena`` processes; they still talk over Arena's bus."""

    address: str | None = None
    """The cluster, as ``ray.init(address=...)`` takes it: ``HOST:PORT`` of its head, ``auto``
    (a cluster that must already run here: ``RAY_ADDRESS``, else the one ``ray start`` last
    started on this machine) or ``local`` (a new Ray instance on this machine, stopped when the
    run ends). None: Ray's default, ``auto`` if it finds a cluster, else ``local``."""
    broker_host: str = "127.0.0.1"
    """Host of the run's own broker (``bus.address`` unset), which runs on the node of ``arena
    train``: the address of that node as every other node reaches it. The default (loopback)
    serves a one-node cluster without keys; a cluster of several nodes needs the node's
    address, and keys (``--keys``) or ``--insecure``."""
    broker_port: int = 0
    """Port of the run's own broker; 0 picks a free one when the run starts (kept in the run
    directory's ``config.yaml``, so a resumed run binds the same)."""
    placement_timeout: float = 300.0
    """Seconds a process may wait for Ray to place it (free resources of the kind it asks for)
    before the run fails, naming it, what it asks for and what the cluster has free."""
    resources: RayResourcesConfig = field(default_factory=RayResourcesConfig)

    def check(self, launcher: str, devices: Mapping[str, str]) -> None:
        """Resource requests Ray can take, a port that exists, and, under ``launcher=ray``, GPUs
        for each kind whose ``devices[kind]`` is CUDA (an actor given none sees none: Ray sets
        ``CUDA_VISIBLE_DEVICES``)."""
        if not 0 <= self.broker_port <= 65535:
            raise ConfigError(f"ray.broker_port must be in 0..65535, got {self.broker_port}")
        if not self.placement_timeout > 0:
            raise ConfigError(f"ray.placement_timeout must be > 0, got {self.placement_timeout}")
        for kind in KINDS:
            res = getattr(self.resources, kind)
            for key in ("num_cpus", "num_gpus"):
                if getattr(res, key) < 0:
                    raise ConfigError(
                        f"ray.resources.{kind}.{key} must be >= 0, got {getattr(res, key)}"
                    )
        if launcher != "ray":
            return
        for kind, device in devices.items():
            if device.startswith("cuda") and getattr(self.resources, kind).num_gpus <= 0:
                raise ConfigError(
                    f"{kind}.device={device} under launcher=ray needs a GPU: set "
                    f"ray.resources.{kind}.num_gpus (Ray hides the GPUs it did not give)"
                )
