"""Where a run's broker is: its own on ``ipc://`` in the run directory (or on tcp under
``launcher=ray``), or one already running at ``bus.address``.

A run whose ``bus.address`` is unset starts a broker of its own; one whose address is set
connects to the broker already running there (:func:`own_broker`). The resolved config keeps the
address unset in the first case, so that a resumed run starts its own broker again rather than
looking for one."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

from arena.bus.peers import IPC_PATH_LIMIT, socket_temp_dir
from arena.run.config import RunConfig


def local_address(run_dir: Path) -> str:
    """The address of a run's own broker: ``bus.sock`` in its run directory, or, where that
    path is too long for a unix socket (a deep ``output_dir``), a socket in the temp directory
    named after the run directory: the same name every time, so a resume, ``arena status`` and
    an actor started by hand find it."""
    path = f"{run_dir.resolve()}/bus.sock"
    if len(path) > IPC_PATH_LIMIT:
        digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
        path = f"{socket_temp_dir(len(digest) + 15)}/arena-run-{digest}.sock"
    return f"ipc://{path}"


def own_address(config: RunConfig, run_dir: Path | None) -> str:
    """Where a run's own broker listens: :func:`local_address`, or under ``launcher=ray``
    (whose processes may run on other nodes) ``tcp://ray.broker_host:ray.broker_port``."""
    if config.launcher == "ray":
        return f"tcp://{config.ray.broker_host}:{config.ray.broker_port or '<port>'}"
    return local_address(run_dir) if run_dir is not None else "ipc://<run_dir>/bus.sock"


def free_port() -> int:
    """A tcp port free on this host now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def own_broker(config: RunConfig, run_dir: Path | None = None) -> bool:
    """Whether the run starts its broker: ``bus.address`` unset (or, in a run directory
    written before the address stayed unset, that directory's own socket)."""
    address = config.bus.address
    return address is None or (run_dir is not None and address == local_address(run_dir))


def bus_address(config: RunConfig, run_dir: Path) -> str:
    """Where the run's processes find the broker."""
    return config.bus.address or own_address(config, run_dir)
