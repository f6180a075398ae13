"""The tutorials of ``docs/plugins.md``, installed as a user would install them, for tests.

A tutorial is the ``python`` and ``toml`` blocks after its marker (``<!-- game tutorial:``).
:func:`install` writes its module and its entry points as a real distribution (a package plus a
``dist-info`` with ``entry_points.txt``, found by ``importlib.metadata`` through ``PYTHONPATH``,
as ``pip install`` leaves it), so fresh processes find the plugin by id."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def block(marker: str, language: str) -> str:
    """The first ``language`` code block after ``marker`` in ``docs/plugins.md``."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    after = text[text.index(marker) :]
    return re.search(rf"```{language}\n(.*?)```", after, re.DOTALL).group(1)


def tutorial(marker: str) -> tuple[str, str, str]:
    """(module path, module code, pyproject snippet) of the tutorial after ``marker``."""
    python, toml = block(marker, "python"), block(marker, "toml")
    path = python.splitlines()[0].removeprefix("# ").strip()
    return path, python, toml


def install(site: Path, marker: str, group: str) -> dict[str, str]:
    """Install the tutorial after ``marker`` into ``site``; its entry points of ``group``.
    Several tutorials (of different groups) install into one ``site`` as one package."""
    path, code, toml = tutorial(marker)
    module = site / path
    module.parent.mkdir(parents=True, exist_ok=True)
    (module.parent / "__init__.py").write_text("")
    module.write_text(code)
    points = tomllib.loads(toml)["project"]["entry-points"][group]
    info = site / "mypkg-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    entry_points = info / "entry_points.txt"
    before = entry_points.read_text() if entry_points.exists() else ""
    entry_points.write_text(f"{before}[{group}]\n{lines}")
    return points


def python(
    site: Path, *args: str, stdin: str = "", env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in the repository root with ``site`` on ``PYTHONPATH`` (``env``: more
    environment variables)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
