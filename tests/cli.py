"""Running the ``arena`` command as a user would, from the repository root, for tests."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from arena.run.preload import (
    LOST,
    PRELOAD_ENV,
    ForkedProcess,
    Preloader,
    PreloadUnavailable,
    start_command,
)

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def arena(
    *args: str | os.PathLike[str], timeout: float = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m arena ARGS`` in the repository root, with no input (a command that would
    prompt gets end of file); its exit code and captured output. ``env``: the environment, in
    place of this one's as it is now (the repository on ``PYTHONPATH`` either way).

    Where that environment names the suite's shared preload server (``ARENA_PRELOAD``,
    tests/conftest.py), the command is forked by it: the same command line in its own
    process, without paying again for the imports it made."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    argv = list(map(str, args))
    if address := env.get(PRELOAD_ENV):
        with contextlib.suppress(PreloadUnavailable):
            return _forked(argv, env, address, timeout)
    return subprocess.run(
        [sys.executable, "-m", "arena", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _forked(
    argv: list[str], env: dict[str, str], address: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """:func:`arena` through the shared preload server at ``address``, with what
    ``subprocess.run`` would return (text with universal newlines) or raise."""
    preloader = Preloader(Path(os.devnull), env, address=address)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            child = preloader.spawn(argv, env, out, err, cwd=ROOT)
            try:
                code = child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(
                    [sys.executable, "-m", "arena", *argv], timeout
                ) from None
        finally:
            preloader.stop()
        if code == LOST and child.pid is None:  # never forked: the server is gone
            raise PreloadUnavailable(f"no preload server at {address}")

        def text(file: IO[bytes]) -> str:
            file.seek(0)
            return file.read().decode().replace("\r\n", "\n").replace("\r", "\n")

        return subprocess.CompletedProcess(
            [sys.executable, "-m", "arena", *argv], code, text(out), text(err)
        )


def arena_process(*args: str, log: Path) -> subprocess.Popen | ForkedProcess:
    """``python -m arena ARGS`` started as its own process, writing to ``log``, as a run's
    launcher starts its learners, inference and rollout actors: forked by the suite's shared preload
    server (``ARENA_PRELOAD``, tests/conftest.py) where there is one, else fresh. Either is
    handled as a ``Popen`` (``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as out:
        return start_command(list(args), env, out)


def python_probe(code: str) -> str:
    """Run ``code`` in a fresh Python (what a new process imports is the point of most probes)
    and return what it printed, stripped; a failure shows its stderr."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def bench_line(script: str, *args: str, timeout: float = 300) -> dict:
    """Run ``bench/<script>`` with ``args`` from the repository root; it must succeed (its
    stderr shows otherwise). Returns the JSON line every benchmark ends with."""
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
