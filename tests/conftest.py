"""Fixtures shared across the test tree. Keep them small; package-specific ones live nearer."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from arena.run.preload import PRELOAD_ENV, PRELOADED

# The suite runs up to 4 workers on as few as 2 cores, and each starts processes that compute with
# torch. Two OpenMP threads a process on oversubscribed cores spin at every barrier for a thread
# that is not running: a Kuhn strategy read of the tiny model took 3.5 s instead of 0.23 s that
# way, at three times the CPU. One thread each (this process and every child it starts) keeps the
# cores busy with work; set OMP_NUM_THREADS to run the suite otherwise.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# Every run a test starts forks its learners, inference and rollout actors from one shared
# preload server per test process (`arena preload --listen`, arena/run/preload.py) instead of a
# server of its own: each run's own would import torch and transformers again, 7-9 CPU-seconds
# and as many of waiting, about a hundred times a suite. The `arena` commands the tests run
# (tests/cli.py) are forked by it too, with what their launchers import (SHARED_MODULES) made
# already. A test of the run's own server, or of the process tree under its launcher, removes
# ARENA_PRELOAD from the environment it runs in (`without_shared_preload`). An ARENA_PRELOAD
# already set is used as it is.
SHARED_MODULES = (*PRELOADED, "arena.cli", "arena.run.train", "arena.tournament.runner")
SHARED_MODULES += ("tensorboard.summary",)
"""What the suite's server imports: a run's children's modules and those of the commands."""
_preload_server: subprocess.Popen | None = None
_preload_path = Path(tempfile.gettempdir()) / f"arena-preload-{os.getpid()}.sock"


def pytest_configure(config: pytest.Config) -> None:
    global _preload_server
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if controller or os.environ.get(PRELOAD_ENV):
        return  # xdist's controller runs no test; its workers each start their own
    log = open(_preload_path.with_suffix(".log"), "wb")  # noqa: SIM115
    root = str(Path(__file__).resolve().parents[1])
    _preload_server = subprocess.Popen(
        [sys.executable, "-m", "arena", "preload", "--listen", str(_preload_path)]
        + ["--modules", ",".join(SHARED_MODULES)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": root, "ARENA_PARENT_PID": str(os.getpid())},
        cwd=root,
    )
    log.close()
    deadline = time.monotonic() + 60
    while not _preload_path.exists() and _preload_server.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)  # it listens before it imports: this wait is the interpreter's start
    if _preload_path.exists():
        os.environ[PRELOAD_ENV] = str(_preload_path)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _preload_server is not None:
        if _preload_server.poll() is None:
            _preload_server.terminate()
            _preload_server.wait(30)
        if _preload_server.returncode == 0:  # else its log is kept, for what went wrong
            _preload_path.with_suffix(".log").unlink(missing_ok=True)


SAME_WORKER = {
    f"tests/arena/policies/{name}.py": "vllm in process"
    for name in ("test_vllm", "test_vllm_adapters", "test_vllm_lora")
}
"""Test files that xdist hands to one worker together: each imports vLLM into the test process
(about 16 CPU-seconds a process), so they share one import."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (the Makefile's), with the files of :data:`SAME_WORKER` as one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SAME_WORKER.get(scope, scope)

    return Scheduling(config, log)


@pytest.fixture
def without_shared_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment without ``ARENA_PRELOAD``: runs start their own preload server."""
    monkeypatch.delenv(PRELOAD_ENV, raising=False)


def torch_devices() -> list[str]:
    """The torch devices of this machine: ``cpu`` always, ``cuda`` where torch sees a GPU."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@pytest.fixture(params=torch_devices())
def device(request: pytest.FixtureRequest) -> str:
    """Each torch device of this machine in turn: a test that takes it runs once on the CPU and,
    on a host with CUDA, once more on the GPU (``test_x[cpu]``, ``test_x[cuda]``), so one suite
    checks both kinds of machine. Compare tensors on the CPU (``.cpu()``): a result exported or
    assembled from buckets is a CPU tensor, the model's own weights live on ``device``."""
    return request.param


@pytest.fixture(scope="session")
def tiny_tokenizer() -> PreTrainedTokenizerBase:
    """SmolLM2's tokenizer (from the embedded GGUF, cached after the first run)."""
    from arena.models import load_tokenizer

    return load_tokenizer("tiny")


@pytest.fixture
def tiny_model(tiny_tokenizer: PreTrainedTokenizerBase):
    """A fresh tiny Llama (seed 0, about 3 M params) and its tokenizer; safe to modify."""
    from arena.models import tiny_model

    return tiny_model(seed=0, tokenizer=tiny_tokenizer)


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    """A short directory for ipc:// sockets (their paths must stay under about 100 bytes)."""
    path = tempfile.mkdtemp(prefix="arena-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def threaded_broker(address: str, heartbeat_timeout: float) -> Iterator[str]:
    """A real broker on its own thread at ``address`` (heartbeats every 0.2 s), stopped on
    exit; it declares an actor dead after ``heartbeat_timeout`` seconds of silence."""
    from arena.bus import Broker

    server = Broker(address, heartbeat_interval=0.2, heartbeat_timeout=heartbeat_timeout)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield address
    finally:
        server.stop()
        thread.join(timeout=5)


@pytest.fixture
def broker(ipc_dir: str) -> Iterator[str]:
    """The address of a real broker on its own thread, over ipc. A generous liveness timeout:
    the actors of a test often share one event loop with the work they do."""
    with threaded_broker(f"ipc://{ipc_dir}/bus.sock", heartbeat_timeout=10.0) as address:
        yield address


def _skipped_on_ci(config: pytest.Config) -> list[pytest.TestReport]:
    if os.environ.get("CI") != "true":
        return []
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return [] if reporter is None else list(reporter.stats.get("skipped", []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under ``CI=true`` every test is meant to run: CI installs every extra and every tool the
    suite uses (``.ci/run``), so a skip there means an install step failed or the host refused
    a capability (network namespaces), and a green run would hide it. A skip fails the run."""
    if _skipped_on_ci(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skipped = _skipped_on_ci(config)
    if not skipped:
        return
    terminalreporter.section("skipped under CI=true, where every test must run", red=True)
    for report in skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        terminalreporter.write_line(f"{report.nodeid}: {reason}")
