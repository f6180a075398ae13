"""The tournament report: ``report.md``, a self-contained ``report.html`` and two plots.

Input is the JSON-ready dict of :func:`arena.eval.ratings.ratings_report` (``ratings``,
``first_mover``, ``pairs``, ``anchor``, ``matches``, ``skipped``, ``multiplayer`` and optionally
``exploitability``); every key is optional so that a tournament with one participant, or with
only multi-player games, still gets a report. This module depends only on the standard library,
numpy and matplotlib: it renders numbers, it never recomputes them.

Formats, which the tests and anyone grepping a report rely on:

- ratings are whole Elo points, the 95% interval in brackets: ``1523 [1480, 1566]``;
- scores (win = 1, draw = 1/2) have three decimals: ``0.625 [0.512, 0.731]``;
- rates are percentages with one decimal: ``1.2%``;
- the first-mover line reads ``First-mover advantage: +35 Elo [12, 58]; ...`` followed by the
  expected score of the first mover between equal players, ``1 / (1 + 10^(-F/400))``.

Both documents come from one list of sections, so the Markdown and the HTML cannot drift apart.
The HTML embeds its images as ``data:`` URIs and its CSS inline: it is one file to attach to a
mail or open offline, and it loads nothing from anywhere. Plots draw on an Agg canvas directly
(no pyplot), so writing a report never opens a window nor changes the caller's backend.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from arena.eval.pair_stats import NOT_LOGGED

ALL_GAMES = "*"
_DASH = "–"
_MD_SPECIAL = re.compile(r"([\\`*<>|&])")
_MD_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th { background: #eee; }
td:first-child, td:nth-child(2), th:first-child, th:nth-child(2) { text-align: left; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""


@dataclass
class _Section:
    """A heading, a few lines of prose, an optional table and an optional image file name."""

    heading: str
    lines: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    table_id: str | None = None
    image: str | None = None


def _num(value: Any, digits: int = 0, sign: bool = False, group: str = "") -> str:
    """A number for a table; a dash for anything missing or not finite.

    Only token counts are grouped (``group=","``): ``[1,480, 1,566]`` would misread.
    """
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return _DASH
    return f"{value:{'+' if sign else ''}{group}.{digits}f}"


def _ci(ci: Any, digits: int = 0) -> str:
    """``[lo, hi]``, or a dash when the interval is missing."""
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return _DASH
    return f"[{_num(ci[0], digits)}, {_num(ci[1], digits)}]"


def _pct(value: Any) -> str:
    return _DASH if _num(value) == _DASH else f"{100 * value:.1f}%"


def _ranked(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Participants by rating, best first; ties (and missing ratings) broken by name."""
    ratings = report.get("ratings") or {}

    def key(item: tuple[str, dict[str, Any]]) -> tuple[float, str]:
        r = item[1].get("rating")
        return (-r if isinstance(r, int | float) and math.isfinite(r) else math.inf, item[0])

    return sorted(ratings.items(), key=key)


def _pooled_pairs(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The all-games rows; when a rater wrote only per-game rows, those stand in for them."""
    pairs = report.get("pairs") or []
    pooled = [p for p in pairs if p.get("game") == ALL_GAMES]
    return pooled or pairs


def games_played(report: dict[str, Any]) -> dict[str, int]:
    """Two-player games each participant played, counted once across pooled rows."""
    played: dict[str, int] = {}
    for p in _pooled_pairs(report):
        for side in ("a", "b"):
            played[p[side]] = played.get(p[side], 0) + int(p.get("games", 0))
    return played


def _first_mover(report: dict[str, Any]) -> str:
    fm = report.get("first_mover") or {}
    f = fm.get("rating")
    if _num(f) == _DASH:
        return "First-mover advantage: not estimated."
    p = 1.0 / (1.0 + 10.0 ** (-f / 400.0))
    return (
        f"First-mover advantage: {_num(f, sign=True)} Elo {_ci(fm.get('ci'))}; "
        f"between equal players the first mover's expected score is {p:.3f}."
    )


def ratings_table(report: dict[str, Any]) -> str:
    """The ratings as aligned plain text for the console (the tournament command prints it)."""
    ranked = _ranked(report)
    if not ranked:
        many = report.get("multiplayer") or {}
        if not many:
            return "No ratings: the log holds no two-player matches."
        lines = ["No Elo ratings (no two-player matches); OpenSkill (ordinal = mu - 3 sigma):"]
        for name, r in many.items():
            lines.append(
                f"  {name}: ordinal {r['ordinal']:.2f} (mu {r['mu']:.2f}, sigma {r['sigma']:.2f})"
            )
        return "\n".join(lines)
    played = games_played(report)
    rows = [["#", "participant", "rating", "95% CI", "games"]]
    for i, (name, r) in enumerate(ranked, 1):
        rows.append(
            [str(i), name, _num(r.get("rating")), _ci(r.get("ci")), str(played.get(name, 0))]
        )
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[c].ljust(w) if c == 1 else row[c].rjust(w) for c, w in enumerate(widths)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _pair_rows(pairs: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for p in pairs:
        a, b = p.get("a", "?"), p.get("b", "?")
        inv, tok = p.get("invalid_rate") or {}, p.get("tokens") or {}
        wdl = "/".join(_num(p.get(k)) for k in ("wins", "draws", "losses"))
        rows.append(
            [
                a,
                b,
                _num(p.get("games")),
                wdl,
                f"{_num(p.get('score'), 3)} {_ci(p.get('ci'), 3)}",
                _logged(p, "invalid_rate", _pct(inv.get(a))),
                _logged(p, "invalid_rate", _pct(inv.get(b))),
                _logged(p, "mean_moves", _num(p.get("mean_moves"), 1)),
                _logged(
                    p, "tokens", f"{_num(tok.get(a), group=',')} / {_num(tok.get(b), group=',')}"
                ),
            ]
        )
    return rows


def _logged(pair: dict[str, Any], key: str, cell: str) -> str:
    """``cell``, or n/a where the ratings JSON says the log does not record ``key`` (null)."""
    return NOT_LOGGED if key in pair and pair[key] is None else cell


_PAIR_HEADERS = ["a", "b", "games", "W/D/L (a)", "score of a [95% CI]", "invalid a", "invalid b"]
_PAIR_HEADERS += ["mean moves", "tokens a / b"]


def _sections(report: dict[str, Any], games: list[str] | None) -> list[_Section]:
    """Everything the report says, in order, independent of the output format."""
    played = games_played(report)
    ratings = _Section("Ratings", table_id="ratings", image="ratings.png")
    ratings.headers = ["rank", "participant", "rating", "95% CI", "games"]
    for i, (name, r) in enumerate(_ranked(report), 1):
        cells = [_num(r.get("rating")), _ci(r.get("ci")), str(played.get(name, 0))]
        ratings.rows.append([str(i), name, *cells])
    if not ratings.rows:
        ratings.lines.append("No two-player matches, so no Elo ratings.")
    if report.get("anchor"):
        ratings.lines.append(f"Elo ratings anchored on {report['anchor']}.")
    ratings.lines.append(_first_mover(report))
    out = [ratings]

    pairs = report.get("pairs") or []
    pooled = [p for p in pairs if p.get("game") == ALL_GAMES]
    by_game = sorted({p.get("game", "?") for p in pairs} - {ALL_GAMES})
    if pooled:
        s = _Section("All games", headers=_PAIR_HEADERS, rows=_pair_rows(pooled))
        s.image = "winrate.png"
        s.lines.append("Pooled over games; the heat map shows the row's score against the column.")
        out.append(s)
    for game in games if games is not None else by_game:
        s = _Section(f"Game: {game}", headers=_PAIR_HEADERS)
        s.rows = _pair_rows([p for p in pairs if p.get("game") == game])
        if not s.rows:
            s.lines.append("No two-player matches of this game.")
        out.append(s)

    multi = report.get("multiplayer") or {}
    if multi:
        s = _Section("Multi-player ratings (OpenSkill)", headers=["participant", "mu", "sigma"])
        s.headers.append("ordinal")
        order = sorted(multi.items(), key=lambda kv: (-(kv[1].get("ordinal") or 0), kv[0]))
        for name, m in order:
            s.rows.append([name, *(_num(m.get(k), 2) for k in ("mu", "sigma", "ordinal"))])
        out.append(s)
    expl = report.get("exploitability") or {}
    if expl:
        s = _Section("Exploitability", headers=["participant", "game", "exploitability"])
        s.headers.append("invalid mass")
        for name, e in sorted(expl.items()):
            s.rows.append([name, str(e.get("game", _DASH)), _num(e.get("exploitability"), 4)])
            s.rows[-1].append(_num(e.get("invalid_mass"), 4))
        out.append(s)

    skipped = report.get("skipped") or []
    log = _Section("Log")
    log.lines.append(f"Matches read: {_num(report.get('matches'))}.")
    log.lines.append(f"Skipped log lines: {len(skipped)}.")
    for item in skipped[:10]:
        log.lines.append(f"line {item.get('line', '?')}: {item.get('reason', '')}")
    if len(skipped) > 10:
        log.lines.append(f"... and {len(skipped) - 10} more.")
    out.append(log)
    return out


def _md(text: str) -> str:
    """Markdown-escape a cell: names such as ``a|b`` or ``<b>x</b>`` must stay literal text."""
    return _MD_UNDERSCORE.sub(r"\\_", _MD_SPECIAL.sub(r"\\\1", text))


def _markdown(title: str, sections: list[_Section]) -> str:
    out = [f"# {_md(title)}", ""]
    for s in sections:
        out += [f"## {_md(s.heading)}", ""]
        out += [line for text in s.lines for line in (_md(text), "")]
        if s.rows:
            out.append("| " + " | ".join(s.headers) + " |")
            out.append("|" + "|".join("---" for _ in s.headers) + "|")
            out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in s.rows]
            out.append("")
        if s.image:
            out += [f"![{s.image[:-4]}]({s.image})", ""]
    return "\n".join(out)


def _html(title: str, sections: list[_Section], images: dict[str, bytes]) -> str:
    e = html.escape
    out = ['<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">']
    out += [f"<title>{e(title)}</title>", f"<style>{_CSS}</style>", "</head>\n<body>"]
    out.append(f"<h1>{e(title)}</h1>")
    for s in sections:
        out.append(f"<h2>{e(s.heading)}</h2>")
        out += [f"<p>{e(line)}</p>" for line in s.lines]
        if s.rows:
            ident = f' id="{e(s.table_id)}"' if s.table_id else ""
            out.append(f"<table{ident}>")
            out.append("<tr>" + "".join(f"<th>{e(h)}</th>" for h in s.headers) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in s.rows]
            out.append("</table>")
        if s.image:
            data = base64.b64encode(images[s.image]).decode("ascii")
            out.append(f'<img alt="{e(s.image[:-4])}" src="data:image/png;base64,{data}">')
    out.append("</body>\n</html>\n")
    return "\n".join(out)


def _label(name: str, limit: int = 28) -> str:
    """A plot label: ``$`` would start mathtext, and long names would squeeze the axes."""
    short = name if len(name) <= limit else name[: limit - 1] + "…"
    return short.replace("$", r"\$")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _placeholder(text: str) -> bytes:
    """A small image that says why there is no plot, so the page layout never breaks."""
    fig = Figure(figsize=(5, 1.5))
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=12)
    return _png(fig)


def winrate_png(report: dict[str, Any]) -> bytes:
    """Heat map of the pooled score matrix: row participant's score against the column's."""
    pooled = _pooled_pairs(report)
    seen = {p[side] for p in pooled for side in ("a", "b")}
    rated = [n for n, _ in _ranked(report) if n in seen]
    names = rated + sorted(seen - set(rated))
    if len(names) < 2:
        return _placeholder("No two-player matches to plot.")
    index = {n: i for i, n in enumerate(names)}
    points, counts = np.zeros((len(names), len(names))), np.zeros((len(names), len(names)))
    for p in pooled:  # weighted by games, in case per-game rows stand in for pooled ones
        a, b, n = index[p["a"]], index[p["b"]], float(p.get("games") or 1)
        if a != b and _num(p.get("score")) != _DASH:
            points[a, b] += n * p["score"]
            points[b, a] += n * (1.0 - p["score"])
            counts[a, b] += n
            counts[b, a] += n
    with np.errstate(invalid="ignore", divide="ignore"):
        grid = np.where(counts > 0, points / counts, np.nan)
    side = 1.5 + 0.75 * len(names)
    fig = Figure(figsize=(side + 1.5, side))
    ax = fig.add_subplot()
    cmap = colormaps["RdYlGn"].with_extremes(bad="#f0f0f0")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0)
    for (i, j), v in np.ndenumerate(grid):
        if math.isfinite(v):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=9)
    labels = [_label(n) for n in names]
    ax.set_xticks(range(len(names)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), labels)
    ax.set_xlabel("opponent (column)")
    ax.set_title("Score of row against column (all games)")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return _png(fig)


def ratings_png(report: dict[str, Any]) -> bytes:
    """Ratings as points with 95% error bars, best at the top."""
    ranked = [(n, r) for n, r in _ranked(report) if _num(r.get("rating")) != _DASH]
    if not ranked:
        return _placeholder("No ratings to plot.")
    y = np.arange(len(ranked))[::-1]
    x = np.array([float(r["rating"]) for _, r in ranked])
    ci = [r.get("ci") if _ci(r.get("ci")) != _DASH else [r["rating"]] * 2 for _, r in ranked]
    lo = np.clip(x - np.array([c[0] for c in ci], dtype=float), 0, None)
    hi = np.clip(np.array([c[1] for c in ci], dtype=float) - x, 0, None)
    fig = Figure(figsize=(7, 1.2 + 0.45 * len(ranked)))
    ax = fig.add_subplot()
    ax.errorbar(
        x, y, xerr=np.vstack([lo, hi]), fmt="o", color="#1f5fa8", ecolor="#7da7d9", capsize=4
    )
    ax.set_yticks(y, [_label(n) for n, _ in ranked])
    ax.set_ylim(-0.7, len(ranked) - 0.3)
    ax.set_xlabel("Elo rating (95% CI)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def write_report(
    out_dir: Path,
    report: dict[str, Any],
    *,
    title: str = "Arena tournament",
    games: list[str] | None = None,
) -> tuple[Path, Path]:
    """Write report.md, report.html, winrate.png and ratings.png; return (markdown, html) paths.

    ``games`` picks and orders the per-game tables (a listed game with no two-player rows says
    so); by default every game found in ``pairs`` appears, sorted.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "ratings": report.get("ratings") or {}}
    images = {"winrate.png": winrate_png(report), "ratings.png": ratings_png(report)}
    for name, data in images.items():
        (out_dir / name).write_bytes(data)
    sections = _sections(report, games)
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    md_path.write_text(_markdown(title, sections), encoding="utf-8")
    html_path.write_text(_html(title, sections, images), encoding="utf-8")
    return md_path, html_path
