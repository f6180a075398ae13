"""``launcher=ray``: the run's processes as Ray actors on a Ray cluster.

Ray only places them. Each child of the run (the broker, the inference actors, the learner, the
rollout actors) gets a :class:`ProcessHost` actor, with the resources its kind asks for
(``ray.resources.<kind>``), that runs **the same** ``arena`` command line the local launcher
would (:mod:`arena.run.processes`) as a subprocess on the node Ray chose, in a process group of
its own. The processes still talk over Arena's bus, never through Ray; Ray carries only the
command lines and the exit codes.

:class:`RayLauncher` is a :class:`~arena.run.launcher.Launcher`: the coordinator watches, restarts
and stops it the same way. A child has ended when its subprocess exits (its exit code) or when
its actor is lost (a node died, someone ``ray.kill``-ed it); a restartable one (rollout actors,
the learner, the run's own broker) gets a new actor, wherever Ray places it, up to its restart budget; any
other end is a :class:`~arena.run.launcher.ChildDied` naming it. A child Ray cannot place within
``ray.placement_timeout`` fails the run too, naming what it asked for and what the cluster has.
:meth:`RayLauncher.stop_all` stops every process group (SIGTERM, then SIGKILL) and kills every
actor; the actors are not detached, so a killed ``arena train`` takes them with it (Ray kills a
driver's actors), and each subprocess gets SIGTERM when its actor's process dies
(``ARENA_PARENT_PID``).

The broker runs on the node of ``arena train`` (the Ray driver), bound to
``tcp://ray.broker_host:ray.broker_port`` (:func:`arena.run.addresses.own_address`). Ray is imported
only here and only when a run uses it: it is an optional dependency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.bus.peers import ADVERTISE_ENV
from arena.bus.security import is_loopback, resolve_security
from arena.core.errors import ConfigError
from arena.core.process import PARENT_ENV, kind_of
from arena.run.launcher import Child, ChildDied, Launcher
from arena.run.ray_config import KINDS, RayConfig, RayResources

log = logging.getLogger("arena.run.ray_launcher")

NOT_FORWARDED = {PARENT_ENV, ADVERTISE_ENV}
"""``ARENA_*`` variables of ``arena train`` that describe its own process or host, not the run."""


def placed_kind(name: str) -> str:
    """The kind of a child from its name (``inference-pool`` -> ``inference``): one Ray places."""
    return kind_of(name, KINDS, "kind Ray places")


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What every child gets from ``arena train``'s environment: the run-wide ``ARENA_*``
    variables (keys, ``--insecure``, routing); everything else comes from the node's worker."""
    env = {k: v for k, v in environ.items() if k.startswith("ARENA_") and k not in NOT_FORWARDED}
    return {**env, "PYTHONUNBUFFERED": "1"}


def actor_options(resources: RayResources) -> dict[str, Any]:
    """The ``.options(...)`` of a child's actor: its resources, and no restart by Ray (the
    launcher restarts, with its own budget)."""
    return {"num_cpus": resources.num_cpus, "num_gpus": resources.num_gpus, "max_restarts": 0}


def threads_for(resources: RayResources, cpu_threads: int) -> str:
    """A child's ``OMP_NUM_THREADS``: ``cpu_threads``, else the CPUs Ray reserved (at least 1)."""
    return str(cpu_threads or max(1, int(resources.num_cpus)))


def describe(resources: RayResources) -> str:
    return f"{resources.num_cpus:g} CPU, {resources.num_gpus:g} GPU"


def beyond_cluster(
    asked: Mapping[str, RayResources], total: Mapping[str, float], placement_timeout: float
) -> str | None:
    """Why the children ``asked`` (name -> its request) cannot all be placed at once on a
    cluster of ``total`` resources (Ray's ``cluster_resources()``), or None when they fit. The
    last of them waits for resources, which only an autoscaler (or a node that joins) brings,
    until ``ray.placement_timeout``: said at once, not after it (``inference.actors=2`` on a
    2-CPU machine asks for 5 CPUs at Ray's default 1 per process)."""
    for key, field in (("CPU", "num_cpus"), ("GPU", "num_gpus")):
        wanted = sum(getattr(r, field) for r in asked.values())
        if wanted > total.get(key, 0) + 1e-9:
            per_kind: dict[str, float] = {}
            for name, r in asked.items():
                per_kind[placed_kind(name)] = per_kind.get(placed_kind(name), 0) + getattr(r, field)
            parts = ", ".join(f"{k} {v:g}" for k, v in per_kind.items() if v)
            return (
                f"launcher=ray: the run's processes ask for {wanted:g} {key} in all ({parts}) "
                f"and the Ray cluster has {total.get(key, 0):g}: the last of them wait for "
                f"resources (a node that joins, an autoscaler) until ray.placement_timeout="
                f"{placement_timeout:g}s; lower ray.resources.<kind>.{field} (fractions "
                f"allowed) or add nodes"
            )
    return None


class ProcessHost:
    """A Ray actor that runs one ``arena`` command line as a subprocess on its node, in a process
    group of its own, and reports how it ended. An async actor: :meth:`stop` runs while
    :meth:`run` waits."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: str, cwd: str) -> None:
        self.argv = argv
        self.env = env
        self.log_path = Path(log_path)
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self.stopping = False
        self.started = asyncio.Event()

    async def run(self) -> int | None:
        """Start the process and wait for it: its exit code (None: stopped before it started).
        Its output goes to the run's ``logs/<name>.log``; it dies with this actor's process."""
        if self.stopping:
            return None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "arena", *self.argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env, PARENT_ENV: str(os.getpid())},
                cwd=self.cwd if os.path.isdir(self.cwd) else None,
                start_new_session=True,
            )
        self.started.set()
        while (code := self.process.poll()) is None:
            await asyncio.sleep(0.2)
        return code

    async def where(self) -> tuple[int, str]:
        """The subprocess's pid and this node's address, once it started."""
        import ray

        await self.started.wait()
        assert self.process is not None
        return self.process.pid, ray.util.get_node_ip_address()

    async def stop(self, timeout: float) -> int | None:
        """SIGTERM the process group, SIGKILL what is left of it after ``timeout``."""
        self.stopping = True
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        _signal_group(process.pid, signal.SIGKILL)  # the process, or children it left behind
        while process.poll() is None:
            await asyncio.sleep(0.05)
        return process.returncode


def _signal_group(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


@dataclass
class RayChild(Child):
    """A child placed by Ray: its actor and what the launcher knows of its subprocess."""

    actor: Any = None
    """The :class:`ProcessHost` actor's handle."""
    done: Any = None
    """The ``run()`` call's result: the exit code once the subprocess ended."""
    placed: Any = None
    """The ``where()`` call's result: (pid, node address) once the subprocess started."""
    remote_pid: int | None = None
    """The subprocess's pid on its node (None until it started)."""
    node: str | None = None
    """The address of the node it runs on."""
    spawned_at: float = 0.0
    """When its actor was asked for (``time.monotonic``): the placement timeout counts from it."""

    @property
    def pid(self) -> int | None:
        return self.remote_pid


class RayLauncher(Launcher):
    """Starts the children of a run as Ray actors (see the module docstring)."""

    child_type = RayChild

    def __init__(
        self, log_dir: Path, config: RayConfig, address: str, cpu_threads: int = 0
    ) -> None:
        """Connect to the cluster ``config.address`` names (or start a local one); ``address``
        is the run's bus address, which every node must reach."""
        super().__init__(log_dir.resolve(), preload=False)  # each child is a Ray actor
        self.config = config
        self.cpu_threads = cpu_threads
        self.env = forwarded_env(os.environ)
        self.cwd = os.getcwd()
        self.ray = import_ray()
        self.owns_ray = not self.ray.is_initialized()
        self._stopped = False
        self._warned_beyond = False
        if self.owns_ray:
            try:
                self.ray.init(address=config.address)
            except (ConnectionError, RuntimeError, ValueError, self.ray.exceptions.RayError) as err:
                hint = (
                    ""
                    if config.address in (None, "auto", "local")
                    else " (a cluster with token authentication, Ray's default, is reached by "
                    "address only with RAY_AUTH_MODE=token and its token, ~/.ray/auth_token or "
                    "RAY_AUTH_TOKEN, in this environment)"
                )
                raise ConfigError(
                    f"launcher=ray: no Ray cluster at ray.address={config.address}: {err}{hint}"
                ) from None
        try:
            self.node_id = self.ray.get_runtime_context().get_node_id()
            check_reachable(address, [n for n in self.ray.nodes() if n.get("Alive")])
            resolve_security(address)  # keys for a non-loopback address, before anything starts
        except BaseException:
            self._shutdown()
            raise
        self._host = self.ray.remote(ProcessHost)

    def resources(self, name: str) -> RayResources:
        """What the child ``name`` asks Ray for."""
        return getattr(self.config.resources, placed_kind(name))

    def _spawn(self, child: Child) -> None:
        assert isinstance(child, RayChild)
        if child.actor is not None:  # a restart: the old actor's process has ended
            self.ray.kill(child.actor)
        resources = self.resources(child.name)
        if not self._warned_beyond:
            # the whole run, not only what started so far: the warning names every kind
            asked = {name: self.resources(name) for name in [*self.expected, *self.children]}
            beyond = beyond_cluster(
                asked, self.ray.cluster_resources(), self.config.placement_timeout
            )
            if beyond:
                self._warned_beyond = True
                log.warning(beyond)
        options = actor_options(resources)
        if placed_kind(child.name) == "broker":  # its address is this node's
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                self.node_id, soft=False
            )
        env = {
            **self.env,
            **child.env,
            "OMP_NUM_THREADS": threads_for(resources, self.cpu_threads),
        }
        log_path = str(self.log_dir / f"{child.name}.log")
        child.actor = self._host.options(**options).remote(child.argv, env, log_path, self.cwd)
        child.done = child.actor.run.remote()
        child.placed = child.actor.where.remote()
        child.remote_pid = child.node = None
        child.spawned_at = time.monotonic()
        log.info("asked Ray to place %s (%s)", child.name, describe(resources))

    def _ended(self, child: Child) -> str | None:
        assert isinstance(child, RayChild)
        if child.actor is None:
            return None
        ray = self.ray
        if child.remote_pid is None:
            ready, _ = ray.wait([child.placed], timeout=0)
            if ready:
                with contextlib.suppress(ray.exceptions.RayError):  # `done` says why
                    child.remote_pid, child.node = ray.get(child.placed)
                    log.info("%s runs as pid %s on %s", child.name, child.pid, child.node)
            elif time.monotonic() - child.spawned_at > self.config.placement_timeout:
                raise ChildDied(self._unplaced(child))
        ready, _ = ray.wait([child.done], timeout=0)
        if not ready:
            return None
        on = f" on {child.node}" if child.node else ""
        try:
            code = ray.get(child.done)
        except ray.exceptions.RayActorError as err:
            return f"was lost{on}: its Ray actor died ({_first_line(err)})"
        except ray.exceptions.RayError as err:
            return f"could not run{on}: {_first_line(err)}"
        child.exit_code = code
        return f"exited with code {code}{on}"

    def _unplaced(self, child: RayChild) -> str:
        free, total = self.ray.available_resources(), self.ray.cluster_resources()
        have = ", ".join(f"{free.get(k, 0):g}/{total.get(k, 0):g} {k}" for k in ("CPU", "GPU"))
        where = " on the node of arena train" if placed_kind(child.name) == "broker" else ""
        return (
            f"{child.name} was not placed by Ray within ray.placement_timeout="
            f"{self.config.placement_timeout:g}s: it asks for "
            f"{describe(self.resources(child.name))}{where} "
            f"(ray.resources.{placed_kind(child.name)}), and the cluster has {have} free"
        )

    def stop_all(self, timeout: float = 15.0) -> None:
        """Stop every child's process group (newest first, at once), kill every actor, and
        leave the cluster (stopping it if this launcher started it)."""
        if self._stopped:
            return
        self._stopped = True
        ray = self.ray
        children = [
            c
            for c in reversed(list(self.children.values()))
            if isinstance(c, RayChild) and c.actor is not None
        ]
        try:
            # an actor not placed yet has no process to stop (and would take the stop only once
            # placed): ray.kill alone ends it
            placed = [c for c in children if ray.wait([c.placed], timeout=0)[0]]
            stops = [c.actor.stop.remote(timeout) for c in placed]
            ready, pending = (
                ray.wait(stops, num_returns=len(stops), timeout=timeout + 10) if stops else ([], [])
            )
            for ref in ready:
                with contextlib.suppress(ray.exceptions.RayError):  # a lost actor: nothing to stop
                    ray.get(ref)
            if pending:
                log.warning("%d Ray actors did not confirm their stop; killing them", len(pending))
            for child in children:
                ray.kill(child.actor)
                child.actor = None
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self.owns_ray:
            self.ray.shutdown()


def check_reachable(address: str, nodes: list[dict[str, Any]]) -> None:
    """A cluster of several nodes needs a bus address the others reach: not ``ipc://`` nor
    loopback (Ray may place any process on any node)."""
    if len(nodes) > 1 and is_loopback(address):
        raise ConfigError(
            f"launcher=ray: the Ray cluster has {len(nodes)} nodes, but the bus address {address} "
            "is reachable from this node only; set ray.broker_host to this node's address as the "
            "others reach it (or bus.address to a broker they all reach), and give keys "
            "(--keys DIR) or --insecure"
        )


def import_ray() -> Any:
    """The ``ray`` module, or a :class:`ConfigError` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "launcher=ray needs Ray: install it into this environment (pip install 'ray>=2.9') "
            "on every node of the cluster"
        ) from None
    return ray


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
