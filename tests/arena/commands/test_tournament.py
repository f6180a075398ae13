"""Run: .venv/bin/python -m pytest -q tests/arena/commands/test_tournament.py

``arena tournament`` and ``arena eval`` as a user runs them: real processes, real reports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli import arena

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.e2e
def test_three_bots_on_two_games_rate_and_report(tmp_path: Path) -> None:
    config = tmp_path / "bots.yaml"
    config.write_text(
        "name: bots\n"
        "participants:\n"
        "  - {name: random, bot: random-v0}\n"
        "  - {name: minimax, bot: minimax-v0}\n"
        "  - {name: shallow, bot: minimax-depth4-v0}\n"
        "games: [{id: tictactoe-v0}, {id: nim-v0}]\n"
        "pairs: 5\n"
        "anchor: random\n"
    )
    done = arena("tournament", str(config), f"out={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    for name in ("matches.jsonl", "ratings.json", "report.md", "report.html", "winrate.png"):
        assert (out / name).is_file(), name
    records = [json.loads(line) for line in (out / "matches.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 3 * 5 * 2  # games x pairings x pairs x seatings
    for record in records:
        if record["game"] == "tictactoe-v0" and "minimax" in record["seats"]:
            assert record["scores"][record["seats"].index("minimax")] >= 0.5  # never beaten
    report = json.loads((out / "ratings.json").read_text())
    assert report["ratings"]["random"]["rating"] == 1000.0
    assert report["ratings"]["minimax"]["rating"] > 1000.0
    assert "first_mover" in report and len(report["pairs"]) >= 6
    assert "minimax" in done.stdout and "report.html" in done.stdout  # the console table

    # `arena ratings` reads the same log and gives the same ratings
    rated = arena("ratings", str(out / "matches.jsonl"), "--anchor", "random", "--json")
    assert rated.returncode == 0, rated.stderr
    again = json.loads(rated.stdout)
    assert set(again["ratings"]) == {"random", "minimax", "shallow"}
    assert again["ratings"]["random"]["rating"] == 1000.0


@pytest.mark.e2e
def test_model_participants_share_one_inference_actor(tmp_path: Path) -> None:
    config = tmp_path / "models.yaml"
    config.write_text(
        "participants:\n"
        "  - {name: random, bot: random-v0}\n"
        "  - {name: greedy, model: tiny, sampling: {max_new_tokens: 4}}\n"
        "  - {name: hot, model: tiny, sampling: {temperature: 1.0, max_new_tokens: 4}}\n"
        "  - {name: chooser, model: tiny, act: choice, sampling: {temperature: 1.0}}\n"
        "games: [{id: tictactoe-v0, kwargs: {max_retries: 1}, role_kwargs: {prefill: true}}]\n"
        "pairs: 2\n"
    )
    done = arena("tournament", str(config), f"out={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr
    logs = sorted(p.name for p in (tmp_path / "out" / "logs").iterdir())
    assert logs == ["broker.log", "inference-model-0.log"]  # one actor serves all three
    records = [
        json.loads(line) for line in (tmp_path / "out" / "matches.jsonl").read_text().splitlines()
    ]
    assert len(records) == 6 * 2 * 2
    # the untrained tiny model never writes a legal move; choosing, it never forfeits
    chooser = [(r, r["seats"].index("chooser")) for r in records if "chooser" in r["seats"]]
    assert len(chooser) == 3 * 2 * 2 and all(r["invalid"][seat] == 0 for r, seat in chooser)
    assert all(r["scores"][seat] > 0 for r, seat in chooser if "random" not in r["seats"])
    for record in records:
        for seat, name in enumerate(record["seats"]):
            if name in ("greedy", "hot") and record["turns"][seat]:
                assert record["tokens"][seat] > 0


@pytest.mark.e2e
def test_eval_one_participant(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    done = arena(
        "eval",
        "tiny",
        "--games",
        "tictactoe-v0",
        "--opponents",
        "random-v0",
        "--n",
        "4",
        "--max-new-tokens",
        "4",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())
    assert result["game"] == "tictactoe-v0" and result["opponent"] == "random-v0"
    assert result["games"] == 4
    assert "tictactoe-v0 vs random-v0: score" in done.stdout


@pytest.mark.e2e
def test_eval_by_choice_never_replies_invalid(tmp_path: Path) -> None:
    """The untrained tiny model writes no valid move (every game forfeited); choosing among
    the legal replies, it cannot reply outside them."""
    out = tmp_path / "eval.json"
    flags = "--games tictactoe-v0 --opponents random-v0 --n 4 --act choice --temperature 1"
    done = arena("eval", "tiny", *flags.split(), "--json", str(out))
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())
    assert result["games"] == 4 and result["invalid_rate"] == 0.0
    refused = arena("eval", "tiny", "--games", "negotiation-v0", "--n", "1", "--act", "choice")
    assert refused.returncode == 2 and "takes free text" in refused.stderr


@pytest.mark.parametrize(
    ("participant", "message"),
    [
        ("minimax-v9", "no bot 'minimax-v9'"),
        ("/nonexistent/model", "no such file or directory: /nonexistent/model"),
    ],
)
def test_eval_names_a_participant_that_cannot_load(participant: str, message: str) -> None:
    done = arena("eval", participant, "--games", "tictactoe-v0", "--n", "2")
    assert done.returncode == 2
    assert message in done.stderr


def test_an_actor_dead_for_good_stops_the_tournament_in_one_line_keeping_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An inference actor past its restarts (`Seating.supervise` raises `ChildDied`, as
    test_serving shows with real processes) ends the command with one line and exit 1, saying
    what the log keeps and how to play the rest; it was a traceback."""
    import arena.tournament.runner as runner
    from arena.cli import main
    from arena.run.launcher import ChildDied

    out = tmp_path / "t"

    def dies(config: object) -> None:
        out.mkdir()
        (out / "matches.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "ga')
        raise ChildDied("inference-model-0 (pid 42) exited with code -9; end of LOG:\n...")

    monkeypatch.setattr(runner, "run_tournament", dies)
    config = tmp_path / "t.yaml"
    config.write_text(
        "participants: [{bot: random-v0}, {bot: mcts-v0}]\n"
        f"games: [{{id: tictactoe-v0}}]\nout: {out}\n"
    )
    assert main(["tournament", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "arena tournament: stopped: inference-model-0 (pid 42) exited with code -9; end of LOG:"
    )
    assert err.endswith(
        f"2 finished matches are in {out / 'matches.jsonl'}; run the same command again to "
        "play the rest\n"
    )
