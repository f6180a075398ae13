"""What a deployment starts, as plain data: the renderers (:mod:`arena.deploy.slurm`,
:mod:`arena.deploy.k8s`) turn it into files and never look at a run config themselves.

``arena deploy`` (:mod:`arena.commands.deploy`) fills a :class:`Deployment` from the run config
and from :func:`arena.run.processes.actor_commands`, the command lines ``arena train`` starts
locally, so a cluster runs exactly the programs a laptop does. This package imports nothing
else of Arena: the import contract (``tests/test_layers.py``) gives ``arena.deploy`` no layer
below it but :mod:`arena.core` (process kinds), and a renderer over plain data needs no more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arena.core.process import PROCESS_KINDS, kind_of

KINDS = PROCESS_KINDS
"""Kinds of process, in the order a deployment starts them (:data:`arena.core.process.PROCESS_KINDS`)."""


@dataclass(frozen=True)
class Resources:
    """What one process of a kind asks its scheduler for."""

    cpus: int = 1
    gpus: int = 0
    memory_gb: int | None = None
    """GiB of memory; None leaves it to the scheduler's default."""


@dataclass(frozen=True)
class Process:
    """One process of a run: an ``arena`` command line and how to keep it going."""

    name: str
    """``broker``, ``train``, ``inference-0``, ``learner``, ``rollout-3``..."""
    argv: list[str]
    """The ``arena`` command line without ``arena`` (``actor_commands``' own)."""
    env: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 0
    """Times a dead one is started again (rollout actors, the broker, the learner); 0: its death
    ends it."""
    reads: list[str] = field(default_factory=list)
    """Files ``arena train`` writes as it starts that this process reads as it starts (its
    ``--config``, the adapters an inference actor serves): a Slurm step waits for them, and a
    Kubernetes pod that reads any of them from the run directory mounts the runs volume."""
    loads_run_dir: bool = False
    """Reads the run directory later, while it serves: a pool actor loads the learners'
    checkpoints (``checkpoints/step-N/model/``) when the run tells it to. A Kubernetes pod
    mounts the runs volume for it (read-only), with nothing to wait for as it starts."""

    @property
    def kind(self) -> str:
        return kind_of(self.name)


@dataclass(frozen=True)
class Deployment:
    """Every process of one run, and what the cluster must give them."""

    name: str
    """The run's name in the cluster (Slurm job name, Kubernetes object prefix)."""
    processes: list[Process]
    resources: dict[str, Resources]
    """Kind -> what each process of that kind asks for (``train`` covers the broker in Slurm,
    where both share the first component)."""
    port: int = 5555
    """The broker's tcp port; every other actor binds an ephemeral one."""
    keys: str | None = None
    """The key directory (Slurm: its path on every node) or None with ``insecure``."""
    insecure: bool = False
    routing: str | None = None
    """``bus.routing``, exported as ``ARENA_ROUTING`` to every process when set."""
    launcher: list[str] = field(default_factory=lambda: ["arena"])
    """How a node runs ``arena`` (``arena``, ``python -m arena``, a venv's ``bin/arena``)."""

    def of_kind(self, kind: str) -> list[Process]:
        return [p for p in self.processes if p.kind == kind]

    def launcher_for(self, process: Process) -> list[str]:
        """``torchrun`` for a learner on several GPUs (every rank runs ``arena learner``; rank 0
        serves the bus), the plain launcher for everything else."""
        gpus = self.resources.get(process.kind, Resources()).gpus
        if process.kind == "learner" and gpus > 1:
            return ["torchrun", "--standalone", f"--nproc-per-node={gpus}", "-m", "arena"]
        return list(self.launcher)
