"""Running the ``arena`` command as a user would, from the repository root, for tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from arena.run.preload import ForkedProcess, spawn_command

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def arena(
    *args: str | os.PathLike[str], timeout: float = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m arena ARGS`` in the repository root, with no input (a command that would
    prompt gets end of file): what ``subprocess.run`` with ``capture_output`` and ``text``
    returns, or raises on ``timeout``. ``env``: the environment, in place of this one's as it is
    now (the repository on ``PYTHONPATH`` either way).

    Where that environment names the suite's shared preload server (``ARENA_PRELOAD``,
    tests/conftest.py), the command is forked by it: the same command line in its own
    process, without paying again for the imports it made."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    argv = list(map(str, args))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = spawn_command(argv, env, out, err, cwd=ROOT)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise subprocess.TimeoutExpired(
                [sys.executable, "-m", "arena", *argv], timeout
            ) from None
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "arena", *argv], code, _text(out), _text(err)
        )


def _text(file: IO[bytes]) -> str:
    """What a file holds, as ``text=True`` reads it (universal newlines)."""
    file.seek(0)
    return file.read().decode().replace("\r\n", "\n").replace("\r", "\n")


def arena_process(*args: str, log: Path) -> subprocess.Popen | ForkedProcess:
    """``python -m arena ARGS`` started as its own process, writing to ``log``, as a run's
    launcher starts its learners, inference and rollout actors: forked by the suite's shared preload
    server (``ARENA_PRELOAD``, tests/conftest.py) where there is one, else fresh. Either is
    handled as a ``Popen`` (``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as out:
        return spawn_command(list(args), env, out)


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
