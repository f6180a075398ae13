"""The before/after evaluation table that ends a training run.

``eval_summary.json`` maps each game to ``invalid_rate_before``, ``invalid_rate_after``,
``score_vs_random_before``, ``score_vs_random_after`` (each with a ``_ci`` companion
``[low, high]``), ``games_per_eval`` and whether each change lies beyond the 95% interval of the
before value. ``eval_summary.md`` is the same as a Markdown table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RANDOM_BOT = "random-v0"


def before_after(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per game: invalid rate (over every opponent) and score against the random bot."""
    out: dict[str, dict[str, Any]] = {}
    games = sorted({r["game"] for r in before} | {r["game"] for r in after})
    for game in games:
        row: dict[str, Any] = {}
        for label, results in (("before", before), ("after", after)):
            mine = [r for r in results if r["game"] == game]
            vs_random = next((r for r in mine if r["opponent"] == RANDOM_BOT), None)
            source = vs_random or (mine[0] if mine else None)
            if source is None:
                continue
            row[f"invalid_rate_{label}"] = source["invalid_rate"]
            row[f"invalid_rate_{label}_ci"] = source["invalid_ci"]
            if vs_random is not None:
                row[f"score_vs_random_{label}"] = vs_random["score"]
                row[f"score_vs_random_{label}_ci"] = vs_random["score_ci"]
            row["games_per_eval"] = source["games"]
            for r in mine:
                if r["opponent"] != RANDOM_BOT:
                    row[f"score_vs_{r['opponent']}_{label}"] = r["score"]
        if "invalid_rate_after" in row and "invalid_rate_before_ci" in row:
            row["invalid_rate_improved"] = (
                row["invalid_rate_after"] < row["invalid_rate_before_ci"][0]
            )
        if "score_vs_random_after" in row and "score_vs_random_before_ci" in row:
            row["score_improved"] = (
                row["score_vs_random_after"] > row["score_vs_random_before_ci"][1]
            )
        out[game] = row
    return out


def markdown(summary: dict[str, dict[str, Any]]) -> str:
    def cell(row: dict[str, Any], key: str) -> str:
        if key not in row:
            return "n/a"
        low, high = row[f"{key}_ci"]
        return f"{row[key]:.3f} [{low:.3f}, {high:.3f}]"

    lines = [
        "| game | invalid rate before | invalid rate after | improved | score vs random before "
        "| score vs random after | improved | games |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for game, row in summary.items():
        lines.append(
            f"| {game} | {cell(row, 'invalid_rate_before')} | {cell(row, 'invalid_rate_after')} "
            f"| {_yes(row.get('invalid_rate_improved'))} | {cell(row, 'score_vs_random_before')} "
            f"| {cell(row, 'score_vs_random_after')} | {_yes(row.get('score_improved'))} "
            f"| {row.get('games_per_eval', 'n/a')} |"
        )
    lines.append("")
    lines.append("Improved: the after value lies beyond the 95% interval of the before value.")
    return "\n".join(lines)


def _yes(flag: bool | None) -> str:
    return "n/a" if flag is None else ("yes" if flag else "no")


def write_eval_summary(
    run_dir: Path, before: list[dict[str, Any]], after: list[dict[str, Any]], run_name: str
) -> str:
    """Write ``eval_summary.json`` and ``.md``; return the Markdown table."""
    summary = before_after(before, after)
    (run_dir / "eval_summary.json").write_text(json.dumps(summary, indent=2))
    table = markdown(summary)
    (run_dir / "eval_summary.md").write_text(
        f"# {run_name}: before and after training\n\n{table}\n"
    )
    return table
