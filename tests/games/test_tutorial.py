"""The "your own game" tutorial of ``docs/plugins.md``, run as written.

Its module and its entry point are installed as a real distribution (a package plus a
``dist-info`` with ``entry_points.txt``, found by ``importlib.metadata`` through ``PYTHONPATH``,
as ``pip install`` leaves it); fresh processes then find the game by id, pass ``arena
check-game``, and play it against ``random-v0`` with ``arena eval`` and ``arena play``.

Run with `.venv/bin/python -m pytest -q tests/games/test_tutorial.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- game tutorial:"


def tutorial() -> tuple[str, str, str]:
    """(module path, module code, pyproject snippet) from the tutorial in ``docs/plugins.md``."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    after = text[text.index(MARKER) :]
    python = re.search(r"```python\n(.*?)```", after, re.DOTALL).group(1)
    toml = re.search(r"```toml\n(.*?)```", after, re.DOTALL).group(1)
    path = python.splitlines()[0].removeprefix("# ").strip()
    return path, python, toml


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory on ``PYTHONPATH`` that holds the tutorial's package as installed."""
    site = tmp_path_factory.mktemp("site")
    path, code, toml = tutorial()
    module = site / path
    module.parent.mkdir(parents=True)
    (module.parent / "__init__.py").write_text("")
    module.write_text(code)
    points = tomllib.loads(toml)["project"]["entry-points"]["arena.games"]
    assert points == {"race-v0": "mypkg.race:RaceToTen"}
    info = site / "mypkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    (info / "entry_points.txt").write_text(f"[arena.games]\n{lines}")
    return site


def arena(site: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "arena", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


def test_the_tutorials_game_passes_check_game(site: Path) -> None:
    done = arena(site, "check-game", "race-v0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "race-v0: PASSED (8/8 checks)" in done.stdout
    listed = arena(site, "games")
    assert re.search(r"race-v0\s.*competitive.*perfect", listed.stdout), listed.stdout


@pytest.mark.e2e
def test_it_plays_against_random_in_eval_and_in_the_terminal(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    done = arena(
        site, "eval", "random-v0", "--games", "race-v0", "--opponents", "random-v0",
        "--n", "4", "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())
    assert (row["game"], row["opponent"], row["games"], row["errors"]) == (
        "race-v0", "random-v0", 4, 0,
    )  # fmt: skip
    assert row["invalid_rate"] == 0.0  # a bot only plays legal moves
    # "add 1" is legal on every turn until the counter reaches ten
    played = arena(
        site, "play", "race-v0", "--against", "random-v0", "--seat", "first", stdin="add 1\n" * 10
    )
    assert played.returncode == 0, played.stderr
    assert "Race to ten. The counter is at 0." in played.stdout
    assert "The counter is at 10." in played.stdout
    assert re.search(r"\b(win|loss)\b", played.stdout), played.stdout
