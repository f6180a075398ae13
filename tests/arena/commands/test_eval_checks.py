"""``arena eval``'s flag checks (arena/commands/eval_checks.py): a flag that no evaluated game
would use is refused in one line (exit 2) before any model loads, never silently ignored.

Run with ``.venv/bin/python -m pytest -q tests/arena/commands/test_eval_checks.py``.
"""

from __future__ import annotations

import pytest

from arena.cli import main


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["eval", "random-v0", "--n", "1", *argv]) == 2
    return capsys.readouterr().err


def test_opponents_for_role_games_alone_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(capsys, "--games", "mae-v0", "--opponents", "random-v0") == (
        "arena eval: bad config: --opponents: mae-v0 is a role game, each seat evaluated "
        "against the game's reference seats, not against opponents; drop --opponents, or add "
        "a player game with --games\n"
    )


def test_a_simulator_no_game_can_seat_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(capsys, "--games", "mae-v0", "nim-v0", "--simulator", "scripted-user-v0") == (
        "arena eval: bad config: --simulator: no seat of mae-v0, nim-v0 may be simulated "
        "(retail-v0's user may, say); drop --simulator\n"
    )


def test_an_opponent_that_cannot_play_a_role_game_is_not_asked_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # minimax cannot play mae-v0, but a role game plays no opponents: only the player game
    # nim-v0 is checked, and the evaluation runs (the bot in every seat of mae-v0 in turn).
    assert main(["eval", "random-v0", "--n", "1", "--games", "mae-v0", "nim-v0",
                 "--opponents", "minimax-v0"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "nim-v0 vs minimax-v0: score" in out
    assert "mae-v0 proposer:" in out
