"""Start a run's model processes from one that has already imported torch and transformers.

Importing torch and transformers' model code takes most of a learner's or an inference actor's
start: 7-9 CPU-seconds on a small CPU, paid again by every one a run starts and by every
restart. A :class:`Preloader` starts one ``arena preload`` process per launcher, which makes
those imports once (:data:`PRELOADED`) and then forks each child the launcher asks for. The
child is the same ``arena`` command as before: its own process, with its own pid, log file,
environment, working directory and command line (what ``ps`` and ``/proc/<pid>/cmdline`` show),
but it starts with the imports already made.

The launcher and the server talk over one ``SOCK_SEQPACKET`` socket pair
(:mod:`arena.run.preload_server` has the protocol and the server's side).

With ``ARENA_PRELOAD=PATH`` in its environment a launcher uses the shared server listening on
``PATH`` (``arena preload --listen PATH``) instead of starting its own, so that a run starts
without waiting for any import: what a host that runs many short runs one after another (a
sweep, a test suite) would otherwise pay once per run. Its children are then the server's, not
the launcher's (``ps``), and they end when the launcher closes its connection or dies. A
``PATH`` where no server answers is named in a warning, and the launcher starts its own.

What a child inherits from the server rather than choosing itself: the environment variables
that torch or transformers read when imported (the launcher's, not the child's own additions).
The child's ``OMP_NUM_THREADS`` is applied with ``torch.set_num_threads``. A server that cannot
start or dies takes its unstarted requests with it; the launcher then starts those children as
fresh processes, and a later request starts a new server.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import IO

from arena.core.process import PARENT_ENV, alive
from arena.run.preload_server import MESSAGE_MAX

log = logging.getLogger("arena.run.preload")

PRELOADED = (
    "torch",
    "transformers.modeling_utils",
    "transformers.models.llama.modeling_llama",
    "arena.policies.hf",
    "arena.actors.inference",
    "trainers.learner_actor",
    "arena.actors.rollout",
    "arena.models.tokenizing:preload",
    "arena.run.config:preload",
)
"""What the server imports before it forks (or, as ``module:function``, calls): the heavy
imports of ``arena learner``, of an ``hf`` inference actor (vLLM is left to the actors that use
it) and of ``arena rollout``, SmolLM2's tokenizer, read, and the defaults of a run's configs."""
PRELOADED_KINDS = ("learner", "inference", "rollout")
"""Kinds of process (the first word of a child's name) that a launcher forks from the server."""
PRELOAD_ENV = "ARENA_PRELOAD"
"""The environment variable that names a shared server's socket (``arena preload --listen``)."""
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
    """The launcher's side: a connection to a server, started (or, with ``address``, reached)
    on first use."""

    def __init__(
        self,
        log_path: Path,
        env: dict[str, str],
        modules: tuple[str, ...] = PRELOADED,
        address: str | None = None,
    ) -> None:
        self.log_path = log_path
        self.env = env
        self.modules = modules
        """What the server imports before it forks (:data:`PRELOADED`)."""
        self.address = address
        """A shared server's socket (``arena preload --listen``), used instead of starting one;
        None: the launcher starts its own."""
        self.server: subprocess.Popen | None = None
        """The launcher's own server, once started (None while it uses a shared one)."""
        self._socket: socket.socket | None = None
        self._waiting: deque[ForkedProcess] = deque()
        self._children: dict[int, ForkedProcess] = {}

    def spawn(
        self,
        argv: list[str],
        env: dict[str, str],
        out: IO[bytes],
        err: IO[bytes] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> ForkedProcess:
        """Ask the server for ``arena argv`` with environment ``env``, output to ``out`` (its
        stderr too, unless ``err`` is given) and working directory ``cwd`` (this process's by
        default). Returns at once; the server forks the child once its imports are done.
        Raises :class:`PreloadUnavailable` when no server can take the request."""
        if self._socket is None or (self.server is not None and self.server.poll() is not None):
            self._start()
        assert self._socket is not None
        request = json.dumps({"argv": argv, "env": env, "cwd": os.fspath(cwd or os.getcwd())})
        outputs = [out.fileno()] + ([err.fileno()] if err is not None else [])
        try:
            socket.send_fds(self._socket, [request.encode()], outputs)
        except OSError as err:
            self._lost()
            raise PreloadUnavailable(f"the preload server is gone ({err})") from err
        child = ForkedProcess(self)
        self._waiting.append(child)
        return child

    def _start(self) -> None:
        self._lost()
        if self.address is not None and self._connect(self.address):
            return
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

    def _connect(self, address: str) -> bool:
        """Connect to the shared server at ``address``; one that does not answer is named once,
        and the launcher starts its own from then on."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect(address)
        except OSError as err:
            connection.close()
            log.warning(
                "no preload server answers at %s=%s (%s): this run starts its own",
                PRELOAD_ENV, address, err.strerror or err,
            )  # fmt: skip
            self.address = None
            return False
        connection.setblocking(False)
        self._socket = connection
        note = f"forking through the shared preload server at {address} ({PRELOAD_ENV})"
        with open(self.log_path, "a") as out:  # where a run's own server would have logged
            out.write(note + "\n")
        log.info(note)
        return True

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
                break
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
        if self.server is None and not self._waiting and not self._children:
            self._lost()  # nothing of ours runs on the shared server: reconnect for the next

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
            if not alive(pid):
                child.returncode = LOST
                del self._children[pid]

    def drop_unforked(self) -> None:
        """Stop the server if it has requests it has not forked yet (it is still importing):
        a run that stops that early ends them, and the children it did fork, at once."""
        self.collect()
        if self._waiting:
            self.stop()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the launcher's own server (after its children: a child outlives it only by a
        moment), or close the connection to a shared one (which ends the children still
        running)."""
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(timeout)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.collect()
        self._lost()


def spawn_command(
    argv: list[str],
    env: dict[str, str],
    out: IO[bytes],
    err: IO[bytes] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen | ForkedProcess:
    """``python -m arena ARGV`` as its own process, with environment ``env``, output to ``out``
    (its stderr too, unless ``err`` is given) and working directory ``cwd`` (this process's by
    default): forked by the shared server that ``env`` names (:data:`PRELOAD_ENV`), else
    started fresh. Either is handled as a ``Popen``. A named server that does not answer is
    warned of, and a server of the command's own forks it (as a launcher's would)."""
    if address := env.get(PRELOAD_ENV):
        try:
            return Preloader(Path(os.devnull), env, address=address).spawn(argv, env, out, err, cwd)
        except PreloadUnavailable:
            pass
    return subprocess.Popen(
        [sys.executable, "-m", "arena", *argv],
        stdout=out,
        stderr=subprocess.STDOUT if err is None else err,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
