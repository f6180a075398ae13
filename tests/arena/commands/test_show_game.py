"""``arena show-game``: the seat, role and edge lines, the PNG, and an invalid graph refused.

Runs the real CLI in a subprocess, as a user would.

Run with `.venv/bin/python -m pytest -q tests/arena/commands/test_show_game.py`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import networkx as nx

from tests.arena.play.test_simulated_seats import Dialogue

ROOT = Path(__file__).resolve().parents[3]


class Orphaned(Dialogue):
    """A graph in which the agent hears nothing from the user, who moves first."""

    def interaction_graph(self) -> nx.DiGraph:
        graph = super().interaction_graph()
        graph.remove_edge("user", "agent")
        return graph


def show(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arena", "show-game", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_a_player_game_shows_its_public_graph(tmp_path: Path) -> None:
    done = show("tictactoe-v0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "tictactoe-v0: competitive, perfect information, seats (2, 2)",
        "seats:",
        "  player_0: player-v0",
        "  player_1: player-v0",
        "edges:",
        "  player_0 -> player_1 sees action",
        "  player_1 -> player_0 sees action",
        "wrote tictactoe-v0.png",
    ]
    png = (tmp_path / "tictactoe-v0.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_a_role_game_shows_roles_simulatable_seats_and_what_edges_carry(tmp_path: Path) -> None:
    target = "tests.arena.play.test_simulated_seats:Dialogue"
    done = show(target, "-o", "graph.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "seats:",
        "  user: player-v0  (simulatable; never sees secret)",
        "  agent: player-v0",
        "edges:",
        "  user -> agent sees message",
        "  agent -> user sees message",
        "wrote graph.png",
    ]
    assert (tmp_path / "graph.png").stat().st_size > 5000


def test_an_invalid_graph_is_named_and_exits_1(tmp_path: Path) -> None:
    done = show("tests.arena.commands.test_show_game:Orphaned", "-o", "-", cwd=tmp_path)
    assert done.returncode == 1
    assert "invalid interaction graph: seats ['agent'] are unreachable from user" in done.stderr
    assert not list(tmp_path.iterdir())
