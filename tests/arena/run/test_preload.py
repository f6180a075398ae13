"""The preload server (``arena preload``): children forked from one process that has made the
imports, as real processes, and the launcher that starts its learners and inference actors
through it: its own server, or the shared one ``ARENA_PRELOAD`` names.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_preload.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.run.launcher import Launcher
from arena.run.preload import (
    LOST,
    PRELOAD_ENV,
    ForkedProcess,
    Preloader,
    PreloadUnavailable,
    spawn_command,
)
from arena.run.preload_server import _adopt_path, _become
from tests.cli import ENV, arena

LIGHT = ("json",)
"""A server that imports next to nothing: the mechanics, without torch's 7-9 s."""

# the suite's own shared server (tests/conftest.py) is out of the way: these launchers start
# their own, or are given the one a test starts
pytestmark = pytest.mark.usefixtures("without_shared_preload")


def wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def broker(tmp_path: Path, name: str) -> list[str]:
    return ["broker", "--bind", f"ipc://{tmp_path}/{name}.sock"]


@pytest.fixture
def preloader(tmp_path: Path):
    preloader = Preloader(tmp_path / "preload.log", dict(ENV), modules=LIGHT)
    yield preloader
    preloader.stop()


def spawn(preloader: Preloader, tmp_path: Path, name: str, argv: list[str]):
    with open(tmp_path / f"{name}.log", "ab") as out:
        return preloader.spawn(argv, dict(ENV), out)


def test_a_forked_child_is_its_own_command_with_its_own_exit_code(
    preloader: Preloader, tmp_path: Path
) -> None:
    listing = spawn(preloader, tmp_path, "games", ["games"])
    typo = spawn(preloader, tmp_path, "typo", ["gmaes"])
    assert listing.wait(120) == 0 and typo.wait(30) == 2  # an unknown command: refused
    assert "kuhn-poker-v0" in (tmp_path / "games.log").read_text()
    assert "did you mean 'games'?" in (tmp_path / "typo.log").read_text()
    served = spawn(preloader, tmp_path, "broker", broker(tmp_path, "a"))
    wait_for(lambda: served.pid is not None and (tmp_path / "a.sock").exists())
    assert served.pid != preloader.server.pid
    assert parent_of(served.pid) == preloader.server.pid
    assert cmdline(served.pid).endswith(f"-m arena broker --bind ipc://{tmp_path}/a.sock")
    assert Path(f"/proc/{served.pid}/cwd").resolve() == Path.cwd().resolve()
    served.kill()
    assert served.wait(30) == -signal.SIGKILL


def test_children_die_with_their_server_and_a_new_one_takes_later_requests(
    preloader: Preloader, tmp_path: Path
) -> None:
    served = spawn(preloader, tmp_path, "broker", broker(tmp_path, "a"))
    wait_for(lambda: served.pid is not None)
    first = preloader.server
    first.kill()  # the server dies: its child gets SIGTERM (its parent-death signal)
    first.wait(30)
    assert served.wait(30) == LOST  # its exit code went with the server
    assert not Path(f"/proc/{served.pid}").exists() or parent_of(served.pid) != first.pid
    again = spawn(preloader, tmp_path, "again", ["games"])
    assert again.wait(120) == 0
    assert preloader.server is not first


def test_the_launcher_forks_learners_and_inference_actors_and_restarts_them(
    tmp_path: Path,
) -> None:
    launcher = Launcher(tmp_path / "logs", env={"PYTHONPATH": ENV["PYTHONPATH"]})
    launcher.preloader.modules = LIGHT
    try:
        inference = launcher.start("inference-0", broker(tmp_path, "i"), restartable=True,
                                   max_restarts=1)  # fmt: skip
        plain = launcher.start("broker", broker(tmp_path, "b"))
        wait_for(lambda: inference.pid is not None)
        server = launcher.preloader.server
        assert parent_of(inference.pid) == server.pid  # forked
        assert parent_of(plain.pid) == os.getpid()  # a broker is started as before
        first = inference.pid
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: launcher.check() != [])  # restarted, through the same server
        wait_for(lambda: inference.pid is not None and inference.pid != first)
        assert parent_of(inference.pid) == server.pid
    finally:
        launcher.stop_all()
    assert inference.process.returncode is not None and server.poll() is not None


def test_a_launcher_whose_server_fails_starts_the_child_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = Launcher(tmp_path / "logs", env={"PYTHONPATH": ENV["PYTHONPATH"]})

    def unavailable(*args, **kwargs):
        raise PreloadUnavailable("the preload server is gone (test)")

    monkeypatch.setattr(launcher.preloader, "spawn", unavailable)
    try:
        learner = launcher.start("learner", broker(tmp_path, "l"))
        assert isinstance(learner.process, subprocess.Popen)
        assert parent_of(learner.pid) == os.getpid()
    finally:
        launcher.stop_all()


@pytest.mark.parametrize("apart", [False, True], ids=["one-output", "stderr-apart"])
def test_become_gives_the_fork_its_output_environment_directory_and_threads(
    tmp_path: Path, apart: bool
) -> None:
    """In a fork of this process: what the child is given, read back through its output (and
    its stderr, into the same file or a second one)."""
    import torch

    out = os.open(tmp_path / "out.txt", os.O_WRONLY | os.O_CREAT)
    outputs = [out, os.open(tmp_path / "err.txt", os.O_WRONLY | os.O_CREAT)] if apart else [out]
    request = {"argv": ["games"], "env": {"OMP_NUM_THREADS": "1", "MINE": "yes"}, "cwd": "/"}
    titled = []
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            _become(request, outputs, titled.append)
            seen = {
                "env": dict(os.environ),
                "cwd": os.getcwd(),
                "argv": sys.argv[1:],
                "threads": torch.get_num_threads(),
                "title": titled,
            }
            os.write(2, b"to stderr\n")
            os.write(1, json.dumps(seen).encode())
        finally:
            os._exit(0)
    for received in outputs:
        os.close(received)
    assert os.waitpid(pid, 0)[1] == 0
    text = (tmp_path / "out.txt").read_text()
    if apart:
        assert (tmp_path / "err.txt").read_text() == "to stderr\n"
    else:
        assert text.startswith("to stderr\n")
    seen = json.loads(text.removeprefix("to stderr\n"))
    assert seen["env"] == {"OMP_NUM_THREADS": "1", "MINE": "yes"}
    assert seen["cwd"] == "/" and seen["argv"] == ["games"] and seen["threads"] == 1
    assert seen["title"][0].endswith(" -m arena games")


def test_a_fork_leaves_the_servers_finalizers_to_the_server(tmp_path: Path) -> None:
    """A child's exit runs its own ``atexit`` work, not the finalizers of the objects the
    server made before forking it (a temporary directory of the server's would go with it)."""
    import atexit
    import weakref

    class Owned:
        pass

    owned = Owned()
    mark = tmp_path / "finalized"
    finalizer = weakref.finalize(owned, mark.write_text, "by the child")
    out = os.open(tmp_path / "out.txt", os.O_WRONLY | os.O_CREAT)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            _become({"argv": ["games"], "env": {}, "cwd": "/"}, [out], lambda title: None)
            atexit._run_exitfuncs()  # as end_fork does
        finally:
            os._exit(0)
    os.close(out)
    assert os.waitpid(pid, 0)[1] == 0
    assert not mark.exists()
    assert finalizer.atexit and finalizer.detach() is not None  # still the server's


def test_a_closed_socket_ends_the_server(tmp_path: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    argv = ["preload", "--fd", str(theirs.fileno()), "--modules", ""]
    server = subprocess.Popen(
        [sys.executable, "-m", "arena", *argv], env=ENV, pass_fds=[theirs.fileno()]
    )
    theirs.close()
    ours.close()
    assert server.wait(60) == 0


def test_stopping_before_the_server_has_forked_ends_what_it_was_asked_for(
    tmp_path: Path,
) -> None:
    """A server still importing holds its requests: the launcher's stop ends them (and the
    server) instead of waiting to signal children that do not exist yet."""
    (tmp_path / "held.py").write_text(  # an import that lasts until the test says so
        f"import os, time\nwhile not os.path.exists({str(tmp_path / 'go')!r}):\n"
        "    time.sleep(0.05)\n"
    )
    env = {"PYTHONPATH": f"{ENV['PYTHONPATH']}:{tmp_path}"}
    launcher = Launcher(tmp_path / "logs", env=env)
    launcher.preloader.modules = ("held",)
    try:
        learner = launcher.start("learner", broker(tmp_path, "l"))
        assert learner.process.poll() is None and learner.pid is None  # asked for, not forked
        server = launcher.preloader.server
    finally:
        launcher.stop_all()
    assert learner.process.returncode == LOST and server.poll() is not None
    assert not (tmp_path / "l.sock").exists()  # never started


def test_started_by_hand_without_a_socket_it_refuses_in_one_line() -> None:
    done = arena("preload", "--fd", "97", "--modules", "")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "arena preload: cannot start: file descriptor 97 is no socket: this command is started "
        "by a run's launcher, which passes it one (arena/run/preload.py); `--listen PATH` "
        "starts a shared server"
    )


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and parent_of(pid) != 0


@pytest.fixture
def shared(ipc_dir: str):
    path = Path(ipc_dir) / "preload.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "arena", "preload", "--listen", str(path), "--modules", ""],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    wait_for(path.exists)
    yield path, server
    server.terminate()
    server.wait(30)
    server.stdout.close()


def test_a_shared_server_forks_for_each_launcher_and_ends_each_ones_children_with_it(
    shared, tmp_path: Path
) -> None:
    path, server = shared
    assert (
        server.stdout.readline() == f"arena preload: listening on {path} (ARENA_PRELOAD={path})\n"
    )
    assert path.stat().st_mode & 0o777 == 0o600  # only this user can ask it for a process
    first = Preloader(tmp_path / "first.log", dict(ENV), address=str(path))
    second = Preloader(tmp_path / "second.log", dict(ENV), address=str(path))
    ours = spawn(first, tmp_path, "ours", broker(tmp_path, "a"))
    theirs = spawn(second, tmp_path, "theirs", broker(tmp_path, "b"))
    typo = spawn(second, tmp_path, "typo", ["gmaes"])
    assert typo.wait(60) == 2  # each exit code reaches the launcher that asked
    wait_for(lambda: ours.pid is not None and theirs.pid is not None)
    assert parent_of(ours.pid) == parent_of(theirs.pid) == server.pid
    assert first.server is None and second.server is None  # neither started its own
    assert "forking through the shared preload server at" in (tmp_path / "first.log").read_text()
    first.stop()  # its connection closes: its child gets SIGTERM, the other's runs on
    wait_for(lambda: not alive(ours.pid))
    assert theirs.poll() is None and server.poll() is None
    theirs.kill()
    assert theirs.wait(30) == -signal.SIGKILL
    later = Preloader(tmp_path / "later.log", dict(ENV), address=str(path))
    assert spawn(later, tmp_path, "later", ["games"]).wait(60) == 0
    later.stop()


def test_spawn_command_forks_through_the_server_its_environment_names(
    shared, tmp_path: Path
) -> None:
    """What the tests' ``arena_process`` and the rollout bench start their actors with."""
    path, server = shared
    with open(tmp_path / "forked.log", "wb") as out:
        forked = spawn_command(["games", "--ids"], {**ENV, PRELOAD_ENV: str(path)}, out)
    with open(tmp_path / "fresh.log", "wb") as out:
        alone = {key: value for key, value in ENV.items() if key != PRELOAD_ENV}
        fresh = spawn_command(["games", "--ids"], alone, out)
    assert isinstance(forked, ForkedProcess) and isinstance(fresh, subprocess.Popen)
    assert forked.wait(60) == fresh.wait(60) == 0
    # nothing of its own runs on the shared server: the connection is closed, not left to gc
    assert forked._preloader._socket is None
    listed = (tmp_path / "fresh.log").read_text()
    assert "tictactoe-v0" in listed and (tmp_path / "forked.log").read_text() == listed


def test_a_launcher_whose_shared_server_is_gone_starts_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ARENA_PRELOAD", str(tmp_path / "gone.sock"))
    launcher = Launcher(tmp_path / "logs", env={"PYTHONPATH": ENV["PYTHONPATH"]})
    launcher.preloader.modules = LIGHT
    try:
        listing = launcher.start("learner", ["games"])
        assert listing.process.wait(120) == 0
        assert launcher.preloader.server is not None  # its own, started instead
    finally:
        launcher.stop_all()
    assert f"no preload server answers at ARENA_PRELOAD={tmp_path / 'gone.sock'}" in caplog.text
    assert "this run starts its own" in caplog.text


def test_listen_refuses_a_path_in_use_and_replaces_a_dead_servers_socket(
    shared, tmp_path: Path
) -> None:
    path, _ = shared
    taken = arena("preload", "--listen", str(path), "--modules", "")
    assert taken.returncode == 2
    assert taken.stderr.strip() == (
        f"arena preload: cannot start: a preload server already listens on {path}"
    )
    (tmp_path / "file").write_text("")
    not_socket = arena("preload", "--listen", str(tmp_path / "file"), "--modules", "")
    assert f"{tmp_path / 'file'} exists and is no socket" in not_socket.stderr
    long = arena("preload", "--listen", "/tmp/" + "x" * 120, "--modules", "")
    assert long.returncode == 2 and "a socket path takes at most 107" in long.stderr
    stale = path.parent / "stale.sock"  # bound, then its process gone: no one listens
    left = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    left.bind(str(stale))
    left.close()
    server = subprocess.Popen(
        [sys.executable, "-m", "arena", "preload", "--listen", str(stale), "--modules", ""],
        env=ENV,
    )
    try:
        preloader = Preloader(tmp_path / "p.log", dict(ENV), address=str(stale))
        wait_for(lambda: preloader._connect(str(stale)))
        assert spawn(preloader, tmp_path, "games", ["games"]).wait(60) == 0
        preloader.stop()
    finally:
        server.terminate()
        assert server.wait(30) == 0
    assert not stale.exists()  # a stopped server removes its socket


def test_a_fork_gets_the_path_a_fresh_process_in_its_directory_would_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    here = os.getcwd()
    monkeypatch.setattr(sys, "path", [here, "/srv/a", "/srv/b", "/usr/lib/python"])
    request = {"cwd": "/work/run", "env": {"PYTHONPATH": "/plugins:/srv/a"}}
    _adopt_path(request, server_path=["/srv/a", "/srv/b"])
    assert sys.path == ["/work/run", "/plugins", "/srv/a", "/usr/lib/python"]
