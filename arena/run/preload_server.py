"""The ``arena preload`` server's side: fork a child per request, and report its pid and its exit.

A server has one or more connections, each a ``SOCK_SEQPACKET`` socket so that each message
arrives whole: a launcher's own server has the one socket pair its launcher made
(:func:`serve`); a shared server (``arena preload --listen PATH``) accepts one connection per
launcher that uses it (:func:`listen`, :func:`serve`). On a connection the launcher sends
``{"argv", "env", "cwd"}`` with the child's output file attached (``SCM_RIGHTS``; a second file,
where there is one, takes its stderr apart from its stdout); the server
answers ``{"pid"}`` per request, in order, and ``{"exited", "code"}`` when that child ends
(``code`` as ``subprocess.Popen.returncode``: negative for a signal).

A connection that closes, because its launcher stopped or died, takes its children with it: the
server sends each one still running SIGTERM, as its parent-death signal would have been. Every
child also dies with the server itself (its parent-death signal).

The server forks only while it runs a single thread and holds no socket to the bus; a forked
child closes every socket of the server's before it runs its command.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import stat
import struct
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena.core.process import PARENT_ENV, Replaced

log = logging.getLogger("arena.run.preload")

MESSAGE_MAX = 1 << 20
"""Largest message either side reads (a child's command line and environment)."""
SOCKET_PATH_MAX = 107
"""Longest path of a Unix socket on Linux (``sun_path`` less its terminating NUL)."""


class Stop(Exception):  # noqa: N818 (not an error: the server asked to stop)
    """SIGTERM or SIGINT reached a shared server: it stops accepting and returns."""


def listen(path: Path) -> socket.socket:
    """A listening socket at ``path`` that only this user can connect to (mode 0600, and
    :func:`serve` checks each peer's uid). A socket file left by a server that is gone is
    replaced; one a live server answers on is refused."""
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise OSError(f"{path} is {len(os.fsencode(path))} bytes; a socket path takes at most "
                      f"{SOCKET_PATH_MAX}: choose a shorter one")  # fmt: skip
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise OSError(f"{path} exists and is no socket: choose another path")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left by a server that is gone
        else:
            raise OSError(f"a preload server already listens on {path}")
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    umask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(umask)
    listener.listen(64)
    return listener


def serve(connections: list[socket.socket], listener: socket.socket | None = None) -> None:
    """The server's loop: fork a child per request on each connection, report its pid, and
    report each child's exit code when it ends. With a ``listener``, accept new connections
    until SIGTERM or SIGINT; without one, return once every connection has closed. In a forked
    child it raises :class:`~arena.core.process.Replaced` with the child's command line, after
    setting up the child (the CLI then runs that command)."""
    server = _Server(connections, listener)
    if listener is not None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, server.stop)
    try:
        server.run()
    except Stop:
        log.info("stopped")
    finally:
        server.close()


class _Server:
    def __init__(self, connections: list[socket.socket], listener: socket.socket | None) -> None:
        self.connections = set(connections)
        self.listener = listener
        self.owner: dict[int, socket.socket] = {}
        """Each running child's pid -> the connection that asked for it."""
        self.title = _title_setter()
        self.python_path = _python_path(os.environ)
        """The ``PYTHONPATH`` entries this server's ``sys.path`` was built with."""
        self.pid = os.getpid()

    def stop(self, *_: Any) -> None:
        if os.getpid() != self.pid:  # a fork that has not reset its handlers yet
            os._exit(128 + signal.SIGTERM)
        raise Stop

    def run(self) -> None:
        while self.listener is not None or self.connections:
            waiting = [*self.connections] + ([self.listener] if self.listener else [])
            try:
                ready, _, _ = select.select(waiting, [], [], 0.1)
            except InterruptedError:
                ready = []
            self._report_exits()
            for sock in ready:
                if sock is self.listener:
                    self._accept()
                else:
                    self._take(sock)

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        uid = struct.unpack("3i", creds)[1]
        if uid != os.getuid():  # the socket's mode already keeps other users out
            log.warning("refused a connection from uid %d", uid)
            connection.close()
            return
        self.connections.add(connection)

    def _take(self, connection: socket.socket) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(connection, MESSAGE_MAX, 2)
        except OSError:
            data, fds = b"", []
        if not data:
            self._drop(connection)
            return
        if _peer_gone(connection):  # its launcher stopped before this child was forked
            for received in fds:
                os.close(received)
            return
        request = json.loads(data)
        request["env"][PARENT_ENV] = str(os.getpid())  # the child dies with this server
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            for sock in [*self.connections, self.listener]:
                if sock is not None:
                    sock.close()
            _adopt_path(request, self.python_path)
            _become(request, fds, self.title)
            raise Replaced(request["argv"])
        for received in fds:
            os.close(received)
        self.owner[pid] = connection
        with contextlib.suppress(OSError):
            connection.send(json.dumps({"pid": pid}).encode())

    def _drop(self, connection: socket.socket) -> None:
        """A launcher closed its connection (or died): its children that still run end."""
        self.connections.discard(connection)
        connection.close()
        for pid, owner in self.owner.items():
            if owner is connection:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)

    def _report_exits(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            owner = self.owner.pop(pid, None)
            if owner is None or owner not in self.connections:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                owner.send(json.dumps({"exited": pid, "code": code}).encode())

    def close(self) -> None:
        if os.getpid() != self.pid:  # a forked child on its way to its command
            return
        for connection in list(self.connections):
            connection.close()
        self.connections.clear()
        if self.listener is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.listener.getsockname())
            self.listener.close()


def _peer_gone(connection: socket.socket) -> bool:
    """The other end has closed, though messages it sent may still be waiting to be read."""
    poller = select.poll()
    poller.register(connection, select.POLLRDHUP)
    return any(events & (select.POLLRDHUP | select.POLLHUP) for _, events in poller.poll(0))


def _python_path(env: dict[str, str] | os._Environ[str]) -> list[str]:
    return [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]


def _adopt_path(request: dict[str, Any], server_path: list[str]) -> None:
    """Give the fork the ``sys.path`` a fresh ``python -m arena`` would have had in the child's
    directory, with the child's ``PYTHONPATH``: a shared server was started elsewhere, with
    its own."""
    if sys.path and sys.path[0] == os.getcwd():
        sys.path[0] = request["cwd"]
    wanted = _python_path(request["env"])
    for entry in server_path:
        if entry not in wanted and entry in sys.path:
            sys.path.remove(entry)
    sys.path[1:1] = [entry for entry in wanted if entry not in sys.path]


def _title_setter() -> Callable[[str], None]:
    """What sets a child's command line as ``ps`` shows it: ``setproctitle`` (vLLM's
    dependency), set up here, before a child replaces its environment (it moves the environment
    out of the way to make room for the title), or nothing when it is not installed."""
    try:
        from setproctitle import getproctitle, setproctitle
    except ImportError:  # then ps shows the server's command line for every child
        return lambda title: None
    setproctitle(getproctitle())
    return setproctitle


def _become(request: dict[str, Any], outputs: list[int], title: Callable[[str], None]) -> None:
    """Turn this fresh fork into the requested child: its output (stdout, and stderr to the
    same file or to a second one), environment, directory, command line, signal handlers and
    torch threads."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(outputs[0], 1)
    os.dup2(outputs[-1], 2)
    os.close(devnull)
    for received in outputs:
        os.close(received)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = request["argv"]
    sys.argv = [sys.argv[0], *argv]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.root.handlers.clear()  # the child's own -v decides its log level
    # The server's objects are not the child's to clean up at its exit (they go with its
    # memory): their finalizers (torch's op libraries, 0.1 CPU-s a child) stay for the server.
    for inherited in list(weakref.finalize._registry):  # type: ignore[attr-defined]
        inherited.atexit = False
    title(" ".join([sys.executable, "-m", "arena", *argv]))
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))
