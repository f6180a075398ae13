"""Run: .venv/bin/python -m pytest -q tests/arena/commands/test_ratings.py

``arena ratings`` as a user runs it: a real subprocess on a small written log. The JSON contract
on stdout, the anchor, malformed lines on stderr, and exit status 2 for a missing file, a bad
anchor and a log with nothing to rate.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import cli

ROOT = Path(__file__).resolve().parents[3]
CONTRACT = ["ratings", "first_mover", "pairs", "anchor", "matches", "skipped", "multiplayer"]


def arena(*args: str | Path) -> subprocess.CompletedProcess:
    """``arena ratings ARGS``."""
    return cli.arena("ratings", *args, timeout=120)


def _match(game: str, seed: int, first: str, second: str, score0: float) -> dict:
    return {
        "game": game,
        "seed": seed,
        "seats": [first, second],
        "scores": [score0, 1 - score0],
        "returns": [2 * score0 - 1, 1 - 2 * score0],
        "moves": 9,
        "termination": "end",
        "tokens": [120, 80],
        "seconds": 0.5,
        "invalid": [1, 0],
    }


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three players (zoe > yan > xia) on two games; line 3 is torn, line 6 lacks its seed."""
    lines = []
    outcomes = {("zoe", "yan"): (1.0, 1.0, 0.5), ("zoe", "xia"): (1.0, 1.0, 1.0)}
    outcomes[("yan", "xia")] = (1.0, 0.5, 0.0)
    for seed in range(12):
        game = ("tictactoe-v0", "connect_four-v3")[seed % 2]
        for (a, b), results in outcomes.items():
            score = results[seed % 3]
            lines += [_match(game, seed, a, b, score), _match(game, seed, b, a, 1 - score)]
    text = [json.dumps(line) for line in lines]
    text.insert(2, '{"game": "tictactoe-v0", "seed": ')
    text.insert(5, json.dumps({k: v for k, v in lines[4].items() if k != "seed"}))
    path = tmp_path_factory.mktemp("ratings") / "matches.jsonl"
    path.write_text("\n".join(text) + "\n")
    return path


def test_json_is_one_object_with_the_contract_keys(log: Path) -> None:
    done = arena(log, "--json", "--resamples", "100")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # exactly one object: anything else fails to parse
    assert list(report) == CONTRACT
    assert report["anchor"] == "xia" and report["ratings"]["xia"]["rating"] == 1000.0
    assert list(report["ratings"]) == ["zoe", "yan", "xia"]
    assert report["matches"] == 72 and len(report["pairs"]) == 9  # 3 pairs x (2 games + "*")
    assert report["skipped"] == [
        {"line": 3, "reason": report["skipped"][0]["reason"]},
        {"line": 6, "reason": "missing field 'seed'"},
    ]
    assert report["skipped"][0]["reason"].startswith("bad JSON")
    assert "line 3: bad JSON" in done.stderr and "line 6: missing field 'seed'" in done.stderr
    assert "skipped 2 malformed lines" in done.stderr
    pooled = next(p for p in report["pairs"] if (p["game"], p["a"], p["b"]) == ("*", "yan", "zoe"))
    # yan against zoe: zoe wins both games of a seed when seed % 3 < 2, else both are drawn;
    # seat 0 makes 1 invalid move in 9 moves (4.5 turns a seat), and each sits first half the time
    assert (pooled["games"], pooled["wins"], pooled["draws"], pooled["losses"]) == (24, 0, 8, 16)
    assert pooled["score"] == pytest.approx(8 / 48, abs=1e-4)
    assert pooled["invalid_rate"] == {"yan": round(12 / 108, 6), "zoe": round(12 / 108, 6)}
    assert pooled["mean_moves"] == 9.0 and pooled["tokens"] == {"yan": 100.0, "zoe": 100.0}
    assert report["multiplayer"] == {}


def test_the_anchor_sits_at_exactly_the_anchor_rating(log: Path) -> None:
    done = arena(log, "--json", "--anchor", "yan", "--resamples", "50", "--game", "tictactoe-v0")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["anchor"] == "yan"
    assert report["ratings"]["yan"] == {"rating": 1000.0, "ci": [1000.0, 1000.0]}
    assert report["ratings"]["zoe"]["rating"] > 1000.0 > report["ratings"]["xia"]["rating"]
    assert {p["game"] for p in report["pairs"]} == {"tictactoe-v0", "*"}
    shifted = json.loads(
        arena(
            log,
            "--json",
            "--anchor",
            "yan",
            "--anchor-rating",
            "1500",
            "--resamples",
            "0",
            "--game",
            "tictactoe-v0",
        ).stdout
    )
    assert shifted["ratings"]["yan"] == {"rating": 1500.0, "ci": [1500.0, 1500.0]}
    gap = report["ratings"]["zoe"]["rating"] - 1000.0
    assert shifted["ratings"]["zoe"]["rating"] - 1500.0 == pytest.approx(gap, abs=0.11)
    assert shifted["ratings"]["zoe"]["ci"] == [None, None]  # --resamples 0: no interval


def test_the_tables_sort_by_rating(log: Path) -> None:
    done = arena(log, "--resamples", "50")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["#", "participant", "rating", "95%", "CI", "games"]
    assert [line.split()[1] for line in lines[2:5]] == ["zoe", "yan", "xia"]
    assert lines[4].split()[2:] == ["1000.0", "[1000.0,", "1000.0]", "48"]
    assert any(line.startswith("first mover: ") for line in lines)
    assert any(line.split()[:3] == ["*", "yan", "zoe"] for line in lines)
    assert "line 3: bad JSON" in done.stderr


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    done = arena(tmp_path / "absent.jsonl")
    assert done.returncode == 2 and done.stdout == ""
    assert "cannot read" in done.stderr and "absent.jsonl" in done.stderr


def test_a_bad_anchor_exits_2_naming_the_nearest(log: Path) -> None:
    done = arena(log, "--json", "--anchor", "zoey")
    assert done.returncode == 2 and done.stdout == ""
    assert "'zoey'" in done.stderr and "did you mean 'zoe'?" in done.stderr


def test_a_log_without_a_valid_two_player_match_exits_2(tmp_path: Path, log: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n\n" + json.dumps({"game": "g"}) + "\n")
    done = arena(path, "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert "line 1: bad JSON" in done.stderr and "holds no valid match to rate" in done.stderr
    done = arena(log, "--game", "tictactoe")
    assert done.returncode == 2 and "did you mean 'tictactoe-v0'?" in done.stderr


def test_another_tools_log_with_only_the_required_fields_is_rated(tmp_path: Path) -> None:
    """``game``, ``seed``, ``seats``, ``scores`` (and ``termination``) are enough: the tables
    that need the missing fields say n/a instead of refusing every line."""
    required = ("game", "seed", "seats", "scores", "termination")
    lines = []
    for seed in range(6):
        for first, second, score in (("ann", "bea", 1.0), ("bea", "ann", 0.0)):
            full = _match("tictactoe-v0", seed, first, second, score)
            lines.append({k: v for k, v in full.items() if k in required[: 4 + seed % 2]})
    path = tmp_path / "other.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = arena(path, "--json", "--resamples", "20")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["skipped"] == [] and report["matches"] == 12
    assert report["ratings"]["ann"]["rating"] > report["ratings"]["bea"]["rating"]
    pooled = next(p for p in report["pairs"] if p["game"] == "*")
    assert (pooled["games"], pooled["wins"], pooled["losses"]) == (12, 12, 0)
    assert pooled["invalid_rate"] is None and pooled["tokens"] is None
    assert pooled["mean_moves"] is None
    table = arena(path, "--resamples", "20")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("*"))
    assert row.split()[-3:] == ["n/a", "n/a", "n/a"]


def test_a_log_of_multi_player_matches_alone_gets_its_openskill_ratings(tmp_path: Path) -> None:
    """A tournament of a three-seat game writes only such matches: `arena ratings` on its log
    exited 2 ("no valid two-player match") where the tournament's report rated them."""
    lines = [
        {"game": "liars-dice-v0", "seed": s, "seats": seats, "scores": [1.0, 0.0, 0.0]}
        for s in range(4)
        for seats in (["ann", "bea", "cid"], ["ann", "cid", "bea"])
    ]
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = arena(path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].startswith("multi-player matches (OpenSkill")
    assert [row.split()[0] for row in out[1:]] == ["participant", "ann", "bea", "cid"]
    report = json.loads(arena(path, "--json").stdout)
    assert report["ratings"] == {} and report["anchor"] is None and report["matches"] == 8
    many = report["multiplayer"]
    assert many["ann"]["mu"] > 25 > many["bea"]["mu"]  # every start is mu 25
    done = arena(path, "--anchor", "ann")
    assert done.returncode == 2 and "holds no two-player match to anchor" in done.stderr
