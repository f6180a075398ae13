"""``arena games`` and ``arena check-game``.

Run with ``.venv/bin/python -m pytest -q tests/games/test_games_commands.py``.
"""

from __future__ import annotations

import pytest
from pettingzoo import AECEnv

import games
from arena.cli import main
from arena.core.registry import Registry, Rejected


def test_arena_games_prints_a_row_per_game(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["games"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["id", "seats", "kind", "information"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    assert set(rows) == set(games.ids())
    assert rows["liars-dice-v0"] == ["2-6", "competitive", "hidden"]
    assert rows["mini-hanabi-v0"] == ["2", "cooperative", "hidden"]


class PlainEnv(AECEnv):
    """A PettingZoo env with no Arena text layer."""

    metadata = {"name": "plain_v0", "render_modes": []}


def test_arena_games_lists_every_good_game_and_names_the_broken_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = Registry("game", entry_point_group=None)
    registry.register("nim-v0", "games.nim:Nim")
    registry.register("plain-v0", PlainEnv, plugin="plain-dist")
    registry.register("gone-v0", "no_such_module_xyz:Game")
    registry.rejected["Bad"] = Rejected("Bad", "pkg:Bad", "bad-dist", "id 'Bad' must look like ...")
    monkeypatch.setattr(games, "registry", registry)
    assert main(["games"]) == 1
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows == {"nim-v0": ["2", "competitive", "perfect", "nim-optimal-v0"]}
    broken = err.splitlines()[-3:]
    assert broken[0] == "  Bad (pkg:Bad, plugin bad-dist): id 'Bad' must look like ..."
    assert broken[1].startswith(
        "  gone-v0 (no_such_module_xyz:Game): cannot import it: ModuleNotFoundError"
    )
    assert broken[2] == (
        f"  plain-v0 ({__name__}:PlainEnv, plugin plain-dist): "
        "PlainEnv is not a games.TextGame (its bases: pettingzoo.utils.env.AECEnv)"
    )
    assert "3 games cannot be listed" in err
    assert main(["games", "--ids"]) == 0
    assert capsys.readouterr().out.split() == ["gone-v0", "nim-v0", "plain-v0"]


def test_check_game_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "nim-v0", "-p", "heaps=(1, 2)"]) == 0
    out = capsys.readouterr().out
    assert "nim-v0: PASSED (8/8 checks)" in out and "FAIL" not in out


def test_check_game_fails_with_a_nonzero_exit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "nim-v0", "-p", "heaps=(0,)"]) == 1
    assert "construct  FAIL" in capsys.readouterr().out


def test_check_game_rejects_unknown_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-game", "nim-v9"]) == 2
    assert "; did you mean 'nim-v0'" in capsys.readouterr().err
    assert main(["check-game"]) == 2


def test_check_game_takes_an_unregistered_module_factory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check-game", "games.nim:Nim", "-p", "heaps=[2, 2]"]) == 0
    assert "games.nim:Nim: PASSED" in capsys.readouterr().out
    assert main(["check-game", "games.nim:Nope"]) == 2
