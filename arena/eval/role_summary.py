"""The role games' part of the before/after summary (:mod:`arena.eval.summary`): each role's
metric before and after training, with its 95% interval and whether it moved beyond the
interval of before (see the summary's docstring for the keys of ``eval_summary.json``)."""

from __future__ import annotations

from typing import Any

from arena.eval.intervals import with_interval
from arena.eval.roles import unreported_text


def is_role_row(result: dict[str, Any]) -> bool:
    """Whether an evaluation row is a role game's (a seat's metric) rather than a match's."""
    return "metric" in result


def role_rows(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Per role game, one entry per (seat, metric), in the order first seen."""
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for label, results in (("before", before), ("after", after)):
        for r in results:
            entry = entries.setdefault(
                (r["game"], r["seat"], r["metric"]),
                {"seat": r["seat"], "role": r["role"], "metric": r["metric"]},
            )
            if r.get("policy"):
                entry["policy"] = r["policy"]
            entry[label] = r["mean"]
            entry[f"{label}_ci"] = r["ci"]
            entry[f"episodes_{label}"] = r["episodes"]
            entry[f"errors_{label}"] = r.get("errors", 0)
            if r.get("first_error") and not entry.get("first_error"):
                entry["first_error"] = r["first_error"]
            if r.get("unreported"):  # no episode of the seat reported a metric
                entry[f"unreported_{label}"] = unreported_text(
                    r["unreported"], r.get("errors", 0), r.get("unreported_reason", "")
                )
    out: dict[str, list[dict[str, Any]]] = {}
    for (game, _, _), entry in entries.items():
        after_value, before_ci = entry.get("after"), entry.get("before_ci")
        if after_value is None or before_ci is None:
            entry["change"] = None
        else:
            low, high = before_ci
            entry["change"] = (
                "higher" if after_value > high else "lower" if after_value < low else "no"
            )
        out.setdefault(game, []).append(entry)
    return out


def role_table(roles: list[tuple[str, dict[str, Any]]], notes: list[str]) -> list[str]:
    """The role games' rows: each role's metric before and after, with its interval."""
    lines = [
        "| game | role (seat) | metric | before | after | change |",
        "|---|---|---|---|---|---|",
    ]
    for game, e in roles:
        before, after = _role_value(e, "before"), _role_value(e, "after")
        change = e.get("change") or "n/a"
        policy = f", policy {e['policy']}" if e.get("policy") else ""
        lines.append(
            f"| {game} | {e['role']} ({e['seat']}{policy}) | {e['metric'] or 'none'} | {before} | "
            f"{after} | {change} |"
        )
        errors = [f"{e[f'errors_{x}']} {x}" for x in ("before", "after") if e.get(f"errors_{x}")]
        what = " ".join(filter(None, (game, e["seat"], e["metric"])))
        for label in ("before", "after"):
            if e.get(f"unreported_{label}"):
                notes.append(f"\n{what} {label}: {e[f'unreported_{label}']}")
        if errors:
            notes.append(
                f"\n{what}: episodes failed ({', '.join(errors)}); the first: "
                f"{e.get('first_error', '')}"
            )
    lines.append("")
    lines.append(
        "Change: higher or lower when the after value lies beyond the 95% interval of the "
        "before value, no when inside it."
    )
    return lines


def _role_value(entry: dict[str, Any], label: str) -> str:
    value, ci = entry.get(label), entry.get(f"{label}_ci")
    if value is None or ci is None:
        if entry.get(f"unreported_{label}"):
            return "n/a (no metrics)"
        failed = entry.get(f"errors_{label}")
        return f"n/a ({failed} failed)" if failed else "n/a"
    return with_interval(value, ci, entry.get(f"episodes_{label}"))
