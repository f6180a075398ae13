"""Fixtures of the ``arena deploy`` tests: a key directory and the command, run in process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from zmq.auth import load_certificate

from arena.bus.keys import generate_keys
from arena.cli import main


class Result(NamedTuple):
    code: int
    out: str
    err: str


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A key directory as ``arena keys generate`` writes it."""
    directory = tmp_path / "keys"
    generate_keys(directory)
    return directory


@pytest.fixture
def secrets(keys: Path) -> list[str]:
    """The secret keys (z85) of ``keys``: what no generated file may hold in the clear."""
    found = []
    for path in sorted(keys.glob("*.key_secret")):
        _, secret = load_certificate(path)
        assert secret is not None
        found.append(secret.decode())
    return found


@pytest.fixture
def deploy(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``arena deploy ARGS...`` in this process; its exit code and output."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(["deploy", *args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
