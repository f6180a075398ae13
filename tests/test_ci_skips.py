"""A green suite on CI means every test ran: ``tests/conftest.py`` fails a run with ``CI=true``
that skipped anything, and lists the skips with their reasons."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_pytest(directory: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": "true"} if ci else {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skip_fails_the_run_only_under_ci(tmp_path: Path) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_some.py").write_text(
        "import pytest\n"
        "def test_runs(): pass\n"
        "def test_needs_a_tool(): pytest.skip('no frobnicator here')\n"
    )
    local = run_pytest(tmp_path, ci=False)
    assert local.returncode == 0, local.stdout
    on_ci = run_pytest(tmp_path, ci=True)
    assert on_ci.returncode == 1, on_ci.stdout
    assert "skipped under CI=true" in on_ci.stdout
    assert "test_some.py::test_needs_a_tool: Skipped: no frobnicator here" in on_ci.stdout
