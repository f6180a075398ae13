"""How every Arena process stops and dies with its launcher (arena/core/process.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_process.py``. Real processes:
a child started with ``ARENA_PARENT_PID`` must go when its parent is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.core.process import alive, kind_of

ROOT = Path(__file__).resolve().parents[3]

SERVE = """
import asyncio, sys
from arena.core.process import serve

async def main(stop):
    print("ready", flush=True)
    await stop.wait()
    print("stopped cleanly", flush=True)
    return 7

sys.exit(serve(main))
"""

PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]],
                         env={**os.environ, "ARENA_PARENT_PID": str(os.getpid())})
print(child.pid, flush=True)
time.sleep(600)
"""

CHILD = """
import time
from arena.core.process import die_with_parent
die_with_parent()
time.sleep(600)
"""


def test_serve_stops_on_sigterm_and_returns_the_result() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 7
    assert proc.stdout.read().strip() == "stopped cleanly"


def test_a_child_dies_with_its_killed_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # let the child reach die_with_parent
    assert alive(child)
    assert _gone_after_killing(parent, child), "the child outlived its SIGKILLed parent"


def _gone_after_killing(parent: subprocess.Popen, child: int, timeout: float = 20.0) -> bool:
    """SIGKILL ``parent``; whether ``child`` is gone within ``timeout`` seconds."""
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + timeout
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(child)


THREADED_PARENT = """
import os, subprocess, sys, threading, time
for _ in range(256):  # a launcher with many threads, as a Ray worker has
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
child = subprocess.Popen([sys.executable, "-m", "arena", "broker", "--bind", sys.argv[1]],
                         env={**os.environ, "ARENA_PARENT_PID": str(os.getpid())},
                         stdout=sys.stderr)
print(child.pid, flush=True)
time.sleep(600)
"""


def _broker_listening(log: Path, pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while "listening" not in (log.read_text() if log.exists() else ""):
        assert alive(pid) and time.monotonic() < deadline, "the broker never started"
        time.sleep(0.1)


def test_a_broker_dies_with_its_killed_multithreaded_launcher(tmp_path: Path) -> None:
    # The kernel sends the death signal each time it reparents the broker, once per exiting
    # thread of the launcher: a second SIGTERM inside the first one's handler used to deadlock
    # on threading.Event's lock (2 of 6 runs here), leaving the broker running for good.
    log = tmp_path / "broker.log"
    with open(log, "w") as out:
        parent = subprocess.Popen(
            [sys.executable, "-c", THREADED_PARENT, f"ipc://{tmp_path}/bus.sock"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
        )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    _broker_listening(log, child)  # past die_with_parent: the death signal is armed
    assert _gone_after_killing(parent, child), "the broker outlived its SIGKILLed launcher"


STUCK = """
import concurrent.futures, sys, threading
from arena.core.process import exit_now

executor = concurrent.futures.ThreadPoolExecutor(1)
entered = threading.Event()
executor.submit(lambda: (entered.set(), threading.Event().wait()))  # a call that never returns
entered.wait()
executor.shutdown(wait=False, cancel_futures=True)
print("stuck", flush=True)
if sys.argv[1] == "exit_now":
    exit_now(3)
"""


def test_exit_now_leaves_a_thread_stuck_in_a_call_behind() -> None:
    """A process whose worker thread never returns (a wedged engine) exits at once with
    ``exit_now``; a plain exit joins that thread and never ends (the test can fail)."""
    done = subprocess.run(
        [sys.executable, "-c", STUCK, "exit_now"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (3, "stuck\n")
    plain = subprocess.Popen(
        [sys.executable, "-c", STUCK, "plain"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert plain.stdout is not None and plain.stdout.readline() == "stuck\n"
        time.sleep(2)
        assert plain.poll() is None  # still held by the interpreter's join of the thread
    finally:
        plain.kill()
        plain.wait()


FORKED = """
import atexit, sys, threading, time
from arena.core.process import end_fork

class Teardown:
    def __del__(self):
        print("torn down", flush=True)

kept = Teardown()  # freed only by the interpreter's teardown
log = open(sys.argv[1], "w")  # written by the command, never flushed nor closed by it

def command():
    log.write("written, not flushed\\n")
    atexit.register(lambda: print("atexit ran", flush=True))
    late = lambda: (time.sleep(0.5), print("thread finished", flush=True))
    threading.Thread(target=late).start()
    if sys.argv[2] == "raise":
        raise RuntimeError("the command failed")
    if sys.argv[2] == "message":
        sys.exit("a message")
    return int(sys.argv[2])

end_fork(command)
"""


@pytest.mark.parametrize(
    ("how", "code", "stderr"),
    [("5", 5, ""), ("message", 1, "a message\n"), ("raise", 1, "RuntimeError: the command failed")],
)
def test_end_fork_leaves_as_exit_would_without_the_teardown(
    tmp_path: Path, how: str, code: int, stderr: str
) -> None:
    """A command in a process forked by ``arena preload`` ends with its exit status, its
    threads joined, its ``atexit`` functions run and its files flushed, but without the
    interpreter's teardown (which would free every object the server made)."""
    log = tmp_path / "log.txt"
    done = subprocess.run(
        [sys.executable, "-c", FORKED, str(log), how],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == code
    assert done.stdout == "thread finished\natexit ran\n"  # no "torn down"
    assert stderr in done.stderr and (stderr or done.stderr == "")
    assert log.read_text() == "written, not flushed\n"


def test_a_process_kind_is_the_first_word_of_its_name() -> None:
    assert [kind_of(n) for n in ("broker", "train", "inference-pool", "rollout-3")] == [
        "broker",
        "train",
        "inference",
        "rollout",
    ]
    with pytest.raises(ValueError, match=r"'watcher-1' is of no known kind \(broker, train, "):
        kind_of("watcher-1")
    with pytest.raises(ValueError, match=r"'train' is of no kind Ray places \(broker, inference\)"):
        kind_of("train", ("broker", "inference"), "kind Ray places")


def _limited(soft: int, hard: int, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter whose open-file limit is (``soft``, ``hard``)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, preexec_fn=limit
    )


def test_a_low_soft_open_file_limit_is_lifted_to_the_hard_one() -> None:
    lifted = _limited(
        32, 100, "from arena.core.process import lift_open_file_limit as f; print(f())"
    )
    assert lifted.returncode == 0 and lifted.stdout.strip() == "100", lifted.stderr


def test_arena_refuses_to_start_below_the_open_files_it_needs() -> None:
    refused = _limited(24, 24, "import sys; from arena.cli import main; sys.exit(main(['games']))")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "arena: cannot start: this process may open only 24 files (ulimit -n); Arena needs at "
        "least 64: raise the hard limit (ulimit -Hn, limits.conf, or the scheduler's setting)"
    )


def test_alive_counts_a_zombie_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert alive(child.pid) and alive(os.getpid())
    child.kill()
    deadline = time.monotonic() + 10
    while alive(child.pid) and time.monotonic() < deadline:  # dead, not reaped: a zombie
        time.sleep(0.05)
    assert Path(f"/proc/{child.pid}").exists() and not alive(child.pid)
    child.wait()
    assert not alive(child.pid)
