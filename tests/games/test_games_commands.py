"""``arena games`` and ``arena check-game``."""

from __future__ import annotations

import pytest

import games
from arena.cli import main


def test_arena_games_prints_a_row_per_game(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["games"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["id", "seats", "kind", "information"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    assert set(rows) == set(games.ids())
    assert rows["liars-dice-v0"] == ["2-6", "competitive", "hidden"]
    assert rows["mini-hanabi-v0"] == ["2", "cooperative", "hidden"]


def test_check_game_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "nim-v0", "-p", "heaps=(1, 2)"]) == 0
    out = capsys.readouterr().out
    assert "nim-v0: PASSED (8/8 checks)" in out and "FAIL" not in out


def test_check_game_fails_with_a_nonzero_exit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "nim-v0", "-p", "heaps=(0,)"]) == 1
    assert "construct  FAIL" in capsys.readouterr().out


def test_check_game_rejects_unknown_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "nim-v9"]) == 2
    assert "did you mean nim-v0" in capsys.readouterr().err
    assert main(["check-game"]) == 2


def test_check_game_takes_an_unregistered_module_factory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "games.nim:Nim", "-p", "heaps=[2, 2]"]) == 0
    assert "games.nim:Nim: PASSED" in capsys.readouterr().out
    assert main(["check-game", "games.nim:Nope"]) == 2
