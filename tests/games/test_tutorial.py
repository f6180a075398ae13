"""The "your own game", "bot", "command" and "role" tutorials of ``docs/plugins.md``, run as
written.

Their modules and entry points are installed as one real distribution (a package plus a
``dist-info`` with ``entry_points.txt``, found by ``importlib.metadata`` through ``PYTHONPATH``,
as ``pip install`` leaves it); fresh processes then find the game by id, pass ``arena
check-game``, and play it against ``random-v0`` with ``arena eval`` and ``arena play``; the bot
wins every game it starts, through the tutorial's command; the role is given to a run's game; the
role game passes ``arena check-game`` and its oracle scores every role in ``arena eval``.

Run with `.venv/bin/python -m pytest -q tests/games/test_tutorial.py`.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.tutorials import install, python

MARKER = "<!-- game tutorial:"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory on ``PYTHONPATH`` that holds the tutorial's package as installed."""
    site = tmp_path_factory.mktemp("site")
    points = install(site, MARKER, "arena.games")
    assert points == {"race-v0": "mypkg.race:RaceToTen"}
    assert install(site, "<!-- bot tutorial:", "arena.bots") == {
        "race-perfect-v0": "mypkg.race_bot:RaceBot"
    }
    assert install(site, "<!-- command tutorial:", "arena.commands") == {"bot-duel": "mypkg.duel"}
    assert install(site, "<!-- role tutorial:", "arena.roles") == {
        "move-player-v0": "mypkg.move_role:MovePlayer"
    }
    for group, points in (
        ("arena.games", {"sums-v0": "mypkg.sums:Sums"}),
        ("arena.bots", {"sums-oracle-v0": "mypkg.sums:SumsOracle"}),
    ):
        assert install(site, "<!-- role game tutorial:", group) == points
    return site


def arena(site: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return python(site, "-m", "arena", *args, stdin=stdin)


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


def test_the_tutorials_bot_command_and_role(site: Path) -> None:
    # the first mover brings the counter to 2, 6 and 10 whatever the random bot adds
    duel = arena(site, "bot-duel", "race-v0", "race-perfect-v0", "random-v0", "--n", "20")
    assert duel.returncode == 0, duel.stderr
    assert duel.stdout == "race-perfect-v0 moving first: mean return +1.000 over 20 games\n"
    listing = arena(site, "--help")
    assert "bot-duel" in listing.stdout
    assert "play one bot against another, the first bot always moving first" in " ".join(
        listing.stdout.split()
    )
    planned = arena(
        site, "train", "configs/smoke.yaml", "games:=[{id: race-v0}]",
        "games.0.role=move-player-v0", "--dry-run",
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert "race-v0 (weight 1.0) role=move-player-v0" in planned.stdout


def test_the_tutorials_role_game_checks_evaluates_and_plans(site: Path) -> None:
    done = arena(site, "check-game", "sums-v0")
    assert "sums-v0: PASSED (8/8 checks)" in done.stdout, done.stdout + done.stderr
    shown = arena(site, "show-game", "sums-v0", "-o", str(site / "sums.png"))
    assert "solver: solver-v0  (never sees answer)" in shown.stdout, shown.stdout + shown.stderr
    # each role against the oracle in the other seat: it proposes valid sums, answers them all
    evaluated = arena(site, "eval", "sums-oracle-v0", "--games", "sums-v0", "--n", "10")
    assert evaluated.returncode == 0, evaluated.stderr
    lines = evaluated.stdout
    assert "sums-v0 proposer-v0 (proposer): proposal_valid 1.000" in lines, lines
    assert "sums-v0 solver-v0 (solver): solver_accuracy 1.000" in lines, lines
    planned = arena(site, "train", "configs/smoke.yaml", "games:=[{id: sums-v0}]", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "sums-v0 (weight 1.0) proposer=proposer-v0 solver=solver-v0" in planned.stdout
