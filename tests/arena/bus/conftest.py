"""Fixtures that start a real broker and real actors as separate processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from arena.bus import BlockingActor


def free_tcp_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_service(address: str, service: str, timeout: float = 20.0) -> None:
    """Block until the broker routes ``service`` (the spawned actor has registered)."""
    deadline = time.monotonic() + timeout
    with BlockingActor(f"probe-{os.getpid()}-{time.monotonic_ns()}", address) as probe:
        while time.monotonic() < deadline:
            actors = probe.call(service="broker.actors", timeout=5.0)
            if any(service in a["services"] for a in actors):
                return
            time.sleep(0.05)
    raise TimeoutError(f"no actor offered {service!r} within {timeout}s")


@pytest.fixture(params=["ipc", "tcp"])
def address(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "ipc":
        return f"ipc://{tmp_path_factory.mktemp('bus')}/b.sock"
    return f"tcp://127.0.0.1:{free_tcp_port()}"


def spawn_broker(address: str, *flags: str) -> subprocess.Popen:
    """An ``arena broker`` on ``address`` (heartbeats every 0.2 s), once it listens."""
    proc = spawn("-m", "arena", "broker", "--bind", address, "--heartbeat-interval", "0.2", *flags)
    line = proc.stdout.readline()
    assert "listening" in line, line
    return proc


@pytest.fixture
def broker(address: str) -> Iterator[str]:
    """A broker process with a 1 MiB message limit and a 1 s heartbeat timeout."""
    proc = spawn_broker(address, "--heartbeat-timeout", "1.0", "--max-message-mb", "1")
    yield address
    stop(proc)
    assert proc.returncode == 0, f"broker exited with {proc.returncode}"


@pytest.fixture
def echo_actor(broker: str) -> Iterator[subprocess.Popen]:
    proc = spawn(
        "-m",
        "arena",
        "echo",
        broker,
        "--name",
        "echo-1",
        "--service",
        "test.echo",
        "--heartbeat-interval",
        "0.2",
    )
    wait_for_service(broker, "test.echo")
    yield proc
    stop(proc)
