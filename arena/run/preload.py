"""Start a run's model processes from one that has already imported torch and transformers.

Importing torch and transformers' model code takes most of a learner's or an inference actor's
start: 7-9 CPU-seconds on a small CPU, paid again by every one a run starts and by every
restart. A :class:`Preloader` starts one ``arena preload`` process per launcher, which makes
those imports once (:data:`PRELOADED`) and then forks each child the launcher asks for. The
child is the same ``arena`` command as before: its own process, with its own pid, log file,
environment, working directory and command line (what ``ps`` and ``/proc/<pid>/cmdline`` show),
but it starts with the imports already made.

The protocol is one ``SOCK_SEQPACKET`` socket pair, so that each message arrives whole: the
launcher sends ``{"argv", "env", "cwd"}`` with the child's log file attached
(``SCM_RIGHTS``); the server answers ``{"pid"}`` per request, in order, and ``{"exited",
"code"}`` when a child ends (``code`` as ``subprocess.Popen.returncode``: negative for a signal).
The server forks only while it runs a single thread and holds no socket to the bus.

What a child inherits from the server rather than choosing itself: the environment variables
that torch or transformers read when imported (the launcher's, not the child's own additions).
The child's ``OMP_NUM_THREADS`` is applied with ``torch.set_num_threads``. A server that cannot
start or dies takes its unstarted requests with it; the launcher then starts those children as
fresh processes, and a later request starts a new server.
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from arena.core.process import PARENT_ENV, Replaced

log = logging.getLogger("arena.run.preload")

PRELOADED = (
    "torch",
    "transformers.modeling_utils",
    "transformers.models.llama.modeling_llama",
    "arena.policies.hf",
    "arena.actors.inference",
    "trainers.learner_actor",
)
"""What the server imports before it forks: the heavy imports of ``arena learner`` and of an
``hf`` inference actor (vLLM is left to the actors that use it)."""
PRELOADED_KINDS = ("learner", "inference")
"""Kinds of process (the first word of a child's name) that a launcher forks from the server."""
MESSAGE_MAX = 1 << 20
"""Largest message either side reads (a child's command line and environment)."""
LOST = 1
"""The exit code a child is given when the server that forked it died before reporting it."""


class PreloadUnavailable(RuntimeError):
    """The server is gone: start the child as a fresh process instead."""


class ForkedProcess:
    """A child forked by the server, handled as a :class:`subprocess.Popen` is (``pid``,
    ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``). Its ``pid``
    is None until the server has forked it."""

    def __init__(self, preloader: Preloader) -> None:
        self._preloader = preloader
        self._pid: int | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        if self._pid is None and self.returncode is None:
            self._preloader.collect()
        return self._pid

    def poll(self) -> int | None:
        self._preloader.collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"pid {self._pid}", timeout or 0)
            self._preloader.collect(0.1 if left is None else min(0.1, left))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the child; one not forked yet is waited for (a minute at most: the server
        may still be importing), and one that has ended is left alone."""
        deadline = time.monotonic() + 60
        while self.pid is None and self.returncode is None and time.monotonic() < deadline:
            self._preloader.collect(0.1)
        if self._pid is not None and self.poll() is None:
            try:
                os.kill(self._pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Preloader:
    """The launcher's side: one ``arena preload`` server, started on first use."""

    def __init__(
        self, log_path: Path, env: dict[str, str], modules: tuple[str, ...] = PRELOADED
    ) -> None:
        self.log_path = log_path
        self.env = env
        self.modules = modules
        """What the server imports before it forks (:data:`PRELOADED`)."""
        self.server: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self._waiting: deque[ForkedProcess] = deque()
        self._children: dict[int, ForkedProcess] = {}

    def spawn(self, argv: list[str], env: dict[str, str], out: IO[bytes]) -> ForkedProcess:
        """Ask the server for ``arena argv`` with environment ``env`` and output to ``out``.
        Returns at once; the server forks the child once its imports are done. Raises
        :class:`PreloadUnavailable` when no server can take the request."""
        if self._socket is None or self.server is None or self.server.poll() is not None:
            self._start()
        assert self._socket is not None
        request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode()
        try:
            socket.send_fds(self._socket, [request], [out.fileno()])
        except OSError as err:
            self._lost()
            raise PreloadUnavailable(f"the preload server is gone ({err})") from err
        child = ForkedProcess(self)
        self._waiting.append(child)
        return child

    def _start(self) -> None:
        self._lost()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(self.log_path, "ab") as out:
                self.server = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "arena",
                        "preload",
                        "--fd",
                        str(theirs.fileno()),
                        "--modules",
                        ",".join(self.modules),
                    ],  # fmt: skip
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    pass_fds=[theirs.fileno()],
                    env={**self.env, PARENT_ENV: str(os.getpid())},
                )
        except OSError as err:
            ours.close()
            raise PreloadUnavailable(f"cannot start the preload server: {err}") from err
        finally:
            theirs.close()
        ours.setblocking(False)
        self._socket = ours
        log.info("started the preload server (pid %d)", self.server.pid)

    def collect(self, timeout: float = 0.0) -> None:
        """Read what the server has said (waiting up to ``timeout`` for the first word)."""
        if self._socket is None:
            self._check_orphans()
            return
        if timeout > 0:
            select.select([self._socket], [], [], timeout)
        while self._socket is not None:
            try:
                data = self._socket.recv(MESSAGE_MAX)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            message = json.loads(data)
            if "pid" in message:
                child = self._waiting.popleft()
                child._pid = message["pid"]
                self._children[child._pid] = child
            elif (ended := self._children.pop(message["exited"], None)) is not None:
                ended.returncode = message["code"]

    def _lost(self) -> None:
        """The server is gone (or never was): what it had not forked never will be, and the
        exit codes of its children are lost once they are gone."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        for child in self._waiting:
            child.returncode = LOST
        self._waiting.clear()
        self._check_orphans()

    def _check_orphans(self) -> None:
        """Children of a server that is gone die with it (their parent-death signal), but
        another process reaps them: each is over once its pid is."""
        for pid, child in list(self._children.items()):
            if not _alive(pid):
                child.returncode = LOST
                del self._children[pid]

    def drop_unforked(self) -> None:
        """Stop the server if it has requests it has not forked yet (it is still importing):
        a run that stops that early ends them, and the children it did fork, at once."""
        self.collect()
        if self._waiting:
            self.stop()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server (after its children: a child outlives it only by a moment)."""
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(timeout)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.collect()
        self._lost()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return Path(f"/proc/{pid}").exists() and _state(pid) != "Z"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def serve(fd: int) -> None:
    """The server's loop on socket ``fd``: fork a child per request, report its pid, and report
    each child's exit code when it ends. Returns when the launcher closes its end. In a forked
    child it raises :class:`~arena.core.process.Replaced` with the child's command line, after
    setting up the child (the CLI then runs that command)."""
    control = socket.socket(fileno=fd)
    server = os.getpid()
    title = _title_setter()
    try:
        while True:
            ready, _, _ = select.select([control], [], [], 0.1)
            _report_exits(control)
            if not ready:
                continue
            data, fds, _, _ = socket.recv_fds(control, MESSAGE_MAX, 1)
            if not data:
                return
            request = json.loads(data)
            request["env"][PARENT_ENV] = str(server)  # the child dies with this server
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            pid = os.fork()
            if pid == 0:
                control.close()
                _become(request, fds[0], title)
                raise Replaced(request["argv"])
            for received in fds:
                os.close(received)
            control.send(json.dumps({"pid": pid}).encode())
    finally:
        if control.fileno() >= 0:
            control.close()


def _report_exits(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        try:
            control.send(json.dumps({"exited": pid, "code": code}).encode())
        except OSError:
            return


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


def _become(request: dict[str, Any], out: int, title: Callable[[str], None]) -> None:
    """Turn this fresh fork into the requested child: its output, environment, directory,
    command line, signal handlers and torch threads."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(devnull)
    os.close(out)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = request["argv"]
    sys.argv = [sys.argv[0], *argv]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.root.handlers.clear()  # the child's own -v decides its log level
    # The server froze what its imports made (gc.freeze: no collection walks it). Thawed at
    # exit, it is freed as in any process: held to the end, triton's bindings report each of
    # their objects as leaked.
    atexit.register(gc.unfreeze)
    title(" ".join([sys.executable, "-m", "arena", *argv]))
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))
