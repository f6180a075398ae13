"""Run: .venv/bin/python -m pytest -q tests/arena/eval/test_report.py

The tournament report from hand-built ratings dicts: the Markdown tables and lines, a
self-contained HTML page (no external asset, images as base64 PNGs, names escaped), edge cases,
and, marked slow, the page rendered by a real headless Chromium.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread

from arena.eval import ratings
from arena.eval.report import games_played, ratings_table, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pair(game: str, a: str, b: str, w: int, d: int, lose: int, **extra: Any) -> dict[str, Any]:
    n = w + d + lose
    row = {"game": game, "a": a, "b": b, "games": n, "wins": w, "draws": d, "losses": lose}
    row |= {"score": (w + d / 2) / n, "ci": [0.25, 0.75], "invalid_rate": {a: 0.0, b: 0.05}}
    row |= {"mean_moves": 9.5, "tokens": {a: 1200, b: 13500}}
    return row | extra


def _report() -> dict[str, Any]:
    """Three participants, two games, every optional key present."""
    pairs = [
        _pair("*", "alpha", "beta", 12, 2, 6, ci=[0.43, 0.82]),
        _pair("*", "alpha", "gamma", 15, 0, 5),
        _pair("*", "beta", "gamma", 10, 4, 6),
        _pair("tictactoe-v0", "alpha", "beta", 6, 2, 2),
        _pair("tictactoe-v0", "alpha", "gamma", 8, 0, 2),
        _pair("kuhn_poker-v0", "beta", "gamma", 5, 0, 5),
    ]
    return {
        "ratings": {
            "gamma": {"rating": 1400.4, "ci": [1340.2, 1460.0]},
            "alpha": {"rating": 1600.0, "ci": [1550.0, 1650.0]},
            "beta": {"rating": 1500.0, "ci": [1449.6, 1550.4]},
        },
        "first_mover": {"rating": 35.0, "ci": [12.0, 58.0]},
        "pairs": pairs,
        "anchor": "beta",
        "matches": 60,
        "skipped": [{"line": 7, "reason": "bad json"}, {"line": 9, "reason": "unknown game"}],
        "multiplayer": {"alpha": {"mu": 27.1, "sigma": 3.2, "ordinal": 17.5}},
        "exploitability": {
            "beta": {"game": "kuhn_poker-v0", "exploitability": 0.1234, "invalid_mass": 0.01}
        },
    }


def _data_pngs(page: str) -> list[bytes]:
    """Every <img> source must be a base64 PNG data URI; return the decoded images."""
    sources = re.findall(r'<img[^>]*\ssrc="([^"]*)"', page)
    out = []
    for src in sources:
        assert src.startswith("data:image/png;base64,"), src[:40]
        out.append(base64.b64decode(src.split(",", 1)[1], validate=True))
    return out


def test_markdown_tables_and_lines(tmp_path: Path) -> None:
    md_path, html_path = write_report(tmp_path / "out", _report(), title="Cup")
    assert md_path == tmp_path / "out" / "report.md" and html_path.name == "report.html"
    for name in ("report.md", "report.html", "winrate.png", "ratings.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    md = md_path.read_text()
    assert md.startswith("# Cup\n")
    # Ratings: sorted best first, whole Elo points, 95% CI, games over the pooled rows.
    rows = [
        "| 1 | alpha | 1600 | [1550, 1650] | 40 |",
        "| 2 | beta | 1500 | [1450, 1550] | 40 |",
        "| 3 | gamma | 1400 | [1340, 1460] | 40 |",
    ]
    positions = [md.index(row) for row in rows]
    assert positions == sorted(positions)
    assert "| rank | participant | rating | 95% CI | games |" in md
    p = 1 / (1 + 10 ** (-35 / 400))
    assert "First-mover advantage: +35 Elo [12, 58]; " in md
    assert f"expected score is {p:.3f}." in md and f"{p:.3f}" == "0.550"
    # Per-game tables: only that game's rows, W/D/L, score with CI, invalid rates, moves, tokens.
    tic = md[md.index("## Game: tictactoe-v0") : md.index("## Multi-player")]
    assert md.index("## Game: kuhn_poker-v0") < md.index("## Game: tictactoe-v0")  # sorted
    assert "| alpha | beta | 10 | 6/2/2 | 0.700 [0.250, 0.750] | 0.0% | 5.0% | 9.5 |" in tic
    assert "| 1,200 / 13,500 |" in tic and "| alpha | gamma | 10 | 8/0/2 |" in tic
    assert "| beta | gamma |" not in tic
    assert "| alpha | beta | 20 | 12/2/6 | 0.650 [0.430, 0.820] |" in md  # the pooled table
    assert "## Multi-player ratings (OpenSkill)" in md and "| alpha | 27.10 | 3.20 | 17.50 |" in md
    assert "| beta | kuhn\\_poker-v0 | 0.1234 | 0.0100 |" not in md  # intraword _ stays plain
    assert "| beta | kuhn_poker-v0 | 0.1234 | 0.0100 |" in md
    assert "Skipped log lines: 2." in md and "line 7: bad json" in md
    assert "Elo ratings anchored on beta." in md and "Matches read: 60." in md
    assert "![winrate](winrate.png)" in md and "![ratings](ratings.png)" in md


def test_html_is_self_contained(tmp_path: Path) -> None:
    _, html_path = write_report(tmp_path, _report(), title="Cup")
    page = html_path.read_text()
    for banned in ("http://", "https://", 'src="http', "<link", "<script", "url("):
        assert banned not in page, banned
    assert "<title>Cup</title>" in page
    table = re.search(r'<table id="ratings">(.*?)</table>', page, re.S)
    assert table is not None
    assert all(f"<td>{name}</td>" in table.group(1) for name in ("alpha", "beta", "gamma"))
    pngs = _data_pngs(page)
    assert len(pngs) == 2 and all(png.startswith(PNG_MAGIC) for png in pngs)
    on_disk = {(tmp_path / n).read_bytes() for n in ("winrate.png", "ratings.png")}
    assert set(pngs) == on_disk
    for png in pngs:  # real pictures, not a blank canvas
        pixels = imread(io.BytesIO(png), format="png")
        assert pixels.shape[0] > 100 and pixels.shape[1] > 200
        assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 20


def test_names_are_escaped(tmp_path: Path) -> None:
    evil, pipe = "<b>x</b>&", "a|b"
    report = {
        "ratings": {evil: {"rating": 10.0, "ci": [0.0, 20.0]}, pipe: {"rating": 0.0}},
        "pairs": [_pair("*", evil, pipe, 3, 0, 1), _pair("g<i>", evil, pipe, 3, 0, 1)],
    }
    md_path, html_path = write_report(tmp_path, report, title="<script>alert(1)</script>")
    page = html_path.read_text()
    assert "<b>" not in page and "<i>" not in page and "<script>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;&amp;" in page and "<h2>Game: g&lt;i&gt;</h2>" in page
    assert "<title>&lt;script&gt;alert(1)&lt;/script&gt;</title>" in page
    md = md_path.read_text()
    assert "<b>" not in md and "\\<b\\>x\\</b\\>\\&" in md
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert row == "| 1 | \\<b\\>x\\</b\\>\\& | 10 | [0, 20] | 4 |"
    row2 = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert len(re.findall(r"(?<!\\)\|", row2)) == 6  # a|b stays inside its cell
    assert "a|b" in ratings_table(report)  # the console is plain text: no escaping there


def test_console_ratings_table() -> None:
    text = ratings_table(_report())
    lines = text.splitlines()
    assert lines[0].split() == ["#", "participant", "rating", "95%", "CI", "games"]
    assert lines[1].split() == ["1", "alpha", "1600", "[1550,", "1650]", "40"]
    assert [line.split()[1] for line in lines[1:]] == ["alpha", "beta", "gamma"]
    assert len({len(line) for line in lines}) == 1  # aligned columns
    assert "No ratings" in ratings_table({"ratings": {}, "pairs": []})
    # a tournament of a three-seat game: its OpenSkill ratings, not "No ratings"
    many = {"ann": {"mu": 28.3, "sigma": 7.58, "ordinal": 5.55}}
    assert ratings_table({"ratings": {}, "pairs": [], "multiplayer": many}).splitlines() == [
        "No Elo ratings (no two-player matches); OpenSkill (ordinal = mu - 3 sigma):",
        "  ann: ordinal 5.55 (mu 28.30, sigma 7.58)",
    ]
    assert games_played(_report()) == {"alpha": 40, "beta": 40, "gamma": 40}


@pytest.mark.parametrize(
    "report",
    [
        {},
        {"ratings": {}, "pairs": [], "skipped": [], "multiplayer": {"m": {"mu": 25.0}}},
        {"ratings": {"solo": {"rating": 1500.0, "ci": [1500.0, 1500.0]}}},
        {"ratings": {"a": {"rating": float("nan")}}, "pairs": [{"game": "g", "a": "a", "b": "b"}]},
    ],
    ids=["empty", "multiplayer-only", "single", "missing-pair-keys"],
)
def test_edge_cases_still_write_a_report(tmp_path: Path, report: dict[str, Any]) -> None:
    md_path, html_path = write_report(tmp_path, report, games=["g", "chess-v0"])
    md, page = md_path.read_text(), html_path.read_text()
    assert "First-mover advantage: not estimated." in md
    assert "## Game: chess-v0" in md and "No two-player matches of this game." in md
    assert all(png.startswith(PNG_MAGIC) for png in _data_pngs(page))
    if not report.get("ratings"):
        assert "No two-player matches, so no Elo ratings." in md and 'id="ratings"' not in page
    if "solo" in str(report):
        assert "| 1 | solo | 1500 | [1500, 1500] | 0 |" in md
    if report.get("pairs"):
        assert "| a | b | – | –/–/– | – – | – | – | – | – / – |" in md


def test_pooled_rows_fall_back_to_per_game_rows(tmp_path: Path) -> None:
    report = _report()
    report["pairs"] = [p for p in report["pairs"] if p["game"] != "*"]
    assert games_played(report) == {"alpha": 20, "beta": 20, "gamma": 20}
    md = write_report(tmp_path, report)[0].read_text()
    assert "## All games" not in md and "## Game: kuhn_poker-v0" in md


def _log_line(game: str, seed: int, first: str, second: str, score0: float) -> str:
    match = {"game": game, "seed": seed, "seats": [first, second], "scores": [score0, 1 - score0]}
    match |= {"returns": [2 * score0 - 1, 1 - 2 * score0], "moves": 7, "termination": "end"}
    match |= {"tokens": [300, 320], "seconds": 1.5, "invalid": [0, 1]}
    return json.dumps(match)


def test_with_the_real_rater(tmp_path: Path) -> None:
    """The rater's own output renders: the keys, shapes and types of the contract agree."""
    strength = {"alpha": 0.8, "beta": 0.5, "gamma": 0.2}
    lines, rng = ["{torn"], np.random.default_rng(0)
    for seed in range(40):
        game = ("tictactoe-v0", "connect_four-v3")[seed % 2]
        for x, y in (("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")):
            for first, second in ((x, y), (y, x)):
                p = 0.5 + strength[first] / 2 - strength[second] / 2
                lines.append(_log_line(game, seed, first, second, float(rng.random() < p)))
    (tmp_path / "matches.jsonl").write_text("\n".join(lines) + "\n")
    log = ratings.read_match_log(tmp_path / "matches.jsonl")
    report = ratings.ratings_report(log, anchor="beta", resamples=50)
    md = write_report(tmp_path / "out", report)[0].read_text()
    ranked = sorted(report["ratings"].items(), key=lambda kv: -kv[1]["rating"])
    assert [name for name, _ in ranked] == ["alpha", "beta", "gamma"]
    for rank, (name, r) in enumerate(ranked, 1):
        lo, hi = r["ci"]
        assert f"| {rank} | {name} | {r['rating']:.0f} | [{lo:.0f}, {hi:.0f}] | 160 |" in md
    assert "## Game: connect\\_four-v3" not in md and "## Game: connect_four-v3" in md
    assert "Skipped log lines: 1." in md and "First-mover advantage: " in md
    assert "| alpha | beta | 80 |" in md
    assert ratings_table(report).splitlines()[1].split()[1] == "alpha"


def test_a_log_without_the_optional_fields_says_n_a(tmp_path: Path) -> None:
    """Another tool's log (``game``, ``seed``, ``seats``, ``scores`` only): the pair tables say
    n/a for invalid rates, length and tokens instead of a number or a dash."""
    bare = ("game", "seed", "seats", "scores")
    lines = [
        json.dumps(
            {k: v for k, v in json.loads(_log_line("g", seed, a, b, 1.0)).items() if k in bare}
        )
        for seed in range(3)
        for a, b in (("ann", "bea"), ("bea", "ann"))
    ]
    (tmp_path / "matches.jsonl").write_text("\n".join(lines) + "\n")
    report = ratings.ratings_report(ratings.read_match_log(tmp_path / "matches.jsonl"), resamples=0)
    md = write_report(tmp_path / "out", report)[0].read_text()
    assert "| ann | bea | 6 | 3/0/3 | 0.500 [0.188, 0.812] | n/a | n/a | n/a | n/a |" in md


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _run_chromium(exe: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    cmd += [f"--user-data-dir={tmp_path / 'profile'}", "--no-first-run", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_real_browser_renders_the_report(tmp_path: Path) -> None:
    exe = _chromium()
    _, html_path = write_report(tmp_path / "report", _report(), title="Cup")
    url = html_path.resolve().as_uri()

    dom = _run_chromium(exe, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    table = re.search(r'<table id="ratings">(.*?)</table>', dom.stdout, re.S)
    assert table is not None, dom.stdout[:2000]
    cells = re.findall(r"<td>([^<]*)</td>", table.group(1))
    assert [cells[i] for i in (1, 6, 11)] == ["alpha", "beta", "gamma"]

    shot = tmp_path / "shot.png"
    run = _run_chromium(exe, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", url)
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    header = shot.read_bytes()[:24]
    assert header[:8] == PNG_MAGIC
    assert struct.unpack(">II", header[16:24]) == (1200, 1600)
    pixels = imread(shot)
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50, f"only {len(colours)} colours: the page looks blank"
    assert pixels[..., :3].std() > 0.05
