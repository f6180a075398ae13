"""The before/after evaluation table that ends a training run.

A score against the random bot mixes up format (an invalid reply forfeits), the opponent's
blunders and strategy, so the summary sets beside it measures of strategy alone:

- the **optimal-move rate** (Tic-Tac-Toe, Nim: :mod:`arena.eval.optimal_moves`), the share of
  the policy's valid moves that keep the best outcome minimax can force;
- the **exploitability** of the policy in Kuhn (and Leduc) poker, read exactly at every
  information state (:mod:`arena.eval.policy_reader`), with the reply mass on no legal move;
- the **score against the game's strongest bot** beside the score against random;
- a **random legal mover** measured in the same games (random-v0 in the policy's seat): what
  each number is worth with no skill at all.

``eval_summary.json`` maps each game to a row of:

- ``invalid_rate_before``/``_after``, ``score_vs_random_before``/``_after`` (each with a ``_ci``
  companion ``[low, high]``), ``games_per_eval``, ``invalid_rate_improved``, ``score_improved``;
- ``strongest_bot`` and ``score_vs_strongest_before``/``_after`` (with ``_ci``) and
  ``score_vs_strongest_improved``, where the evaluation played the strongest bot;
  ``score_vs_<bot>_before``/``_after`` for every opponent other than the random bot;
- in a game whose kind is not competitive (cooperative, general-sum: there the score, which
  compares the seats' returns, says little), ``return_vs_random_before``/``_after`` (with
  ``_ci``), the evaluated seat's mean return against the random bot, ``return_improved`` and
  ``random_baseline_return`` (with ``_ci``);
- ``optimal_move_rate_before``/``_after`` (with ``_ci``) and ``optimal_move_rate_improved``,
  where the game is solved, from the games against the random bot;
- ``random_baseline_score``, ``random_baseline_optimal_move_rate`` and
  ``random_baseline_score_vs_strongest`` (each with ``_ci``), where measured;
- for Kuhn poker, ``kuhn_exploitability_before``/``_after``, ``kuhn_invalid_mass_before``/
  ``_after``, ``kuhn_exploitability_improved``, ``kuhn_exploitability_temperature`` (the
  evaluation's, 0 = greedy), ``kuhn_exploitability_after_step`` (the checkpoint read) and, when
  the training sampling temperature differs, ``kuhn_exploitability_sampling_before``/``_after``,
  ``kuhn_invalid_mass_sampling_before``/``_after`` and
  ``kuhn_exploitability_sampling_temperature`` (the run's ``sampling.temperature``), with
  ``kuhn_exploitability_sampling_seat_temperatures`` (seat -> temperature) where seats were
  read at their policies' own temperatures; Leduc hold'em the same with ``leduc_``.

"Improved" means the after value lies beyond the 95% interval of the before value (in the
better direction); an exploitability is exact, so there it means strictly lower.
``errors_before``/``_after`` count the games that could not finish (a bot or a simulator
failed; never scored), with ``first_error_before``/``_after``, where any failed.

A role game (its rows are :class:`~arena.eval.roles.RoleResult` dicts, told apart by their
``metric``) has no opponent: its row holds ``roles``, one entry per evaluated seat and metric
with ``seat``, ``role``, ``metric``, ``before``/``after`` (each with ``_ci``; None where no
episode finished), ``episodes_before``/``_after``, ``errors_before``/``_after``, ``first_error``
and ``change``: ``higher`` or ``lower`` when the after value lies beyond the before value's 95%
interval, ``no`` when inside it (a metric's better direction is the game's business: success
up, tool errors down). A seat whose every episode failed has the metric ``""``, and so has a
seat none of whose episodes reported a metric: its ``unreported_before``/``_after`` say how
they ended (``no episode reported metrics (8 of 8 forfeited; ...)``), under the table too.

In a run with named policies each evaluation row names the policy that played it
(``policy``), and the summary keeps them apart: a player game has an entry per policy, under
``<game>, policy <policy>`` (``main``: the shared policy), compared with the random mover in the
same seats; the game's exploitability (read over every seat, each with its policy) goes on its
first entry. A role entry carries its ``policy`` too.

``eval_summary.md`` shows the same as one row per game and measure, with the random mover's
value and the exploitability references beside each, and one row per role and metric of the
role games. An interval over fewer than 10 games (``games_per_eval``; a role's episodes) is
shown as ``n too small``, the value beside it as measured; the JSON keeps every interval.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import games
from arena.eval.evaluate import RANDOM_BOT
from arena.eval.exploitability import (
    KUHN_ALWAYS_BET,
    KUHN_CARD_RULE,
    KUHN_NASH,
    KUHN_UNIFORM,
    LEDUC_UNIFORM,
)
from arena.eval.intervals import with_interval
from arena.eval.role_summary import is_role_row, role_rows, role_table

OPTIMAL_KEYS = (("", "_before"), ("", "_after"), ("random_baseline_", ""))
EXPLOITABILITY_PREFIX = {"kuhn-poker-v0": "kuhn", "leduc-holdem-v0": "leduc"}
"""Games whose exploitability the summary shows -> the prefix of their keys."""
REFERENCES = {
    "kuhn": (
        ("uniform random", KUHN_UNIFORM),
        ("always bet", KUHN_ALWAYS_BET),
        ("card rule", KUHN_CARD_RULE),
        ("Nash", KUHN_NASH),
    ),
    "leduc": (("uniform random", LEDUC_UNIFORM), ("CFR+ 200 iterations", 0.004963)),
}
"""Exploitability of reference policies, chips per hand (see :mod:`arena.eval.exploitability`)."""


def _against(results: list[dict[str, Any]], opponent: str) -> dict[str, Any] | None:
    """The result against ``opponent`` (a resolved bot id), if the evaluation played it."""
    return next((r for r in results if r["opponent"] == opponent), None)


def strongest_bot(game: str) -> str | None:
    """The game's strongest reference bot, unless that is the random bot (or unknown)."""
    try:
        bot = games.spec(game).strongest_bot
    except games.RegistryError:  # unknown, or a plugin whose spec cannot be read: no column
        return None
    return bot if bot and bot != RANDOM_BOT else None


def before_after(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    baseline: list[dict[str, Any]] | None = None,
    readings: list[dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per game: invalid rate (over every opponent), score against the random bot and the
    strongest bot, optimal-move rate, the random mover's values (``baseline``: results of
    random-v0 in the policy's seat) and exploitability (``readings``: :class:`StrategyReading`
    dicts)."""
    baseline, readings = baseline or [], readings or []
    out: dict[str, dict[str, Any]] = {}
    by_role = role_rows([r for r in before if is_role_row(r)], [r for r in after if is_role_row(r)])
    before = [r for r in before if not is_role_row(r)]
    after = [r for r in after if not is_role_row(r)]
    entries = sorted({_entry(r) for r in before} | {_entry(r) for r in after})
    read: set[str] = set()
    for game, policy in entries:
        row: dict[str, Any] = {}
        strongest = strongest_bot(game)
        for label, results in (("before", before), ("after", after)):
            played = [r for r in results if _entry(r) == (game, policy)]
            failed = [r for r in played if r.get("errors")]
            if failed:
                row[f"errors_{label}"] = sum(r["errors"] for r in failed)
                row[f"first_error_{label}"] = failed[0]["first_error"]
            mine = [r for r in played if r["games"]]  # a row whose every game failed has none
            vs_random = _against(mine, RANDOM_BOT)
            source = vs_random or (mine[0] if mine else None)
            if source is None:
                continue
            row[f"invalid_rate_{label}"] = source["invalid_rate"]
            row[f"invalid_rate_{label}_ci"] = source["invalid_ci"]
            if vs_random is not None:
                row[f"score_vs_random_{label}"] = vs_random["score"]
                row[f"score_vs_random_{label}_ci"] = vs_random["score_ci"]
            if vs_random is not None and vs_random.get("kind", "competitive") != "competitive":
                row[f"return_vs_random_{label}"] = vs_random["mean_return"]
                row[f"return_vs_random_{label}_ci"] = vs_random["return_ci"]
            if vs_random is not None and vs_random.get("optimal_move_rate") is not None:
                row[f"optimal_move_rate_{label}"] = vs_random["optimal_move_rate"]
                row[f"optimal_move_rate_{label}_ci"] = vs_random["optimal_move_ci"]
            row["games_per_eval"] = source["games"]
            for r in mine:
                if r["opponent"] != RANDOM_BOT:
                    row[f"score_vs_{r['opponent']}_{label}"] = r["score"]
            vs_strongest = _against(mine, strongest) if strongest else None
            if vs_strongest is not None:
                row["strongest_bot"] = strongest
                row[f"score_vs_strongest_{label}"] = vs_strongest["score"]
                row[f"score_vs_strongest_{label}_ci"] = vs_strongest["score_ci"]
        _flag(row, "invalid_rate_improved", "invalid_rate", lower=True)
        _flag(row, "score_improved", "score_vs_random")
        _flag(row, "score_vs_strongest_improved", "score_vs_strongest")
        _flag(row, "return_improved", "return_vs_random")
        _flag(row, "optimal_move_rate_improved", "optimal_move_rate")
        _baseline(
            row, [r for r in baseline if _entry(r) == (game, policy) and r["games"]], strongest
        )
        if game not in read:  # a reading is of every seat: once, on the game's first entry
            read.add(game)
            _exploitability(row, game, [r for r in readings if r["game"] == game])
        out[f"{game}, policy {policy}" if policy else game] = row
    for game, entries in by_role.items():
        out.setdefault(game, {})["roles"] = entries
    return out


def _entry(result: dict[str, Any]) -> tuple[str, str]:
    """(game, policy) of an evaluation row: the policy empty where one plays every seat."""
    return result["game"], result.get("policy", "")


def _flag(row: dict[str, Any], name: str, key: str, lower: bool = False) -> None:
    """``row[name]``: whether the after value lies beyond the before value's 95% interval."""
    if f"{key}_after" not in row or row.get(f"{key}_before_ci") is None:
        return  # not measured, or one game: no interval
    low, high = row[f"{key}_before_ci"]
    row[name] = row[f"{key}_after"] < low if lower else row[f"{key}_after"] > high


def _baseline(row: dict[str, Any], results: list[dict[str, Any]], strongest: str | None) -> None:
    vs_random = _against(results, RANDOM_BOT)
    if vs_random is not None:
        row["random_baseline_score"] = vs_random["score"]
        row["random_baseline_score_ci"] = vs_random["score_ci"]
        if "return_vs_random_after" in row or "return_vs_random_before" in row:
            row["random_baseline_return"] = vs_random["mean_return"]
            row["random_baseline_return_ci"] = vs_random["return_ci"]
        if vs_random.get("optimal_move_rate") is not None:
            row["random_baseline_optimal_move_rate"] = vs_random["optimal_move_rate"]
            row["random_baseline_optimal_move_rate_ci"] = vs_random["optimal_move_ci"]
    vs_strongest = _against(results, strongest) if strongest else None
    if vs_strongest is not None:
        row["random_baseline_score_vs_strongest"] = vs_strongest["score"]
        row["random_baseline_score_vs_strongest_ci"] = vs_strongest["score_ci"]


def _exploitability(row: dict[str, Any], game: str, readings: list[dict[str, Any]]) -> None:
    prefix = EXPLOITABILITY_PREFIX.get(game)
    if prefix is None:
        return
    for r in readings:
        kind = "_sampling" if r.get("sampling") else ""
        row[f"{prefix}_exploitability{kind}_{r['label']}"] = r["exploitability"]
        row[f"{prefix}_invalid_mass{kind}_{r['label']}"] = r["invalid_mass"]
        row[f"{prefix}_exploitability{kind}_temperature"] = r["temperature"]
        if r.get("seat_temperatures"):
            row[f"{prefix}_exploitability{kind}_seat_temperatures"] = r["seat_temperatures"]
        if r["label"] == "after" and not kind:
            row[f"{prefix}_exploitability_after_step"] = r["step"]
    before, after = (row.get(f"{prefix}_exploitability_{x}") for x in ("before", "after"))
    if before is not None and after is not None:
        row[f"{prefix}_exploitability_improved"] = after < before


# -- Markdown ------------------------------------------------------------------------------------
def _interval(row: dict[str, Any], key: str) -> str:
    """The value with its interval, judged by the games of an evaluation (the random mover
    plays the same games): ``n too small`` below :data:`~arena.eval.intervals.MIN_N`."""
    if row.get(key) is None:
        return "n/a"
    if f"{key}_ci" not in row:
        return f"{row[key]:.3f}"
    return with_interval(row[key], row[f"{key}_ci"], row.get("games_per_eval"))


def _yes(flag: bool | None) -> str:
    return "n/a" if flag is None else ("yes" if flag else "no")


def _temperature(t: float) -> str:
    return "greedy" if t == 0 else f"T={t:g}"


def seats_at(seat_temperatures: dict[str, float] | None) -> str:
    """``, player_1 at T=0.5``: the seats a reading read at temperatures of their own."""
    return "".join(f", {a} at {_temperature(t)}" for a, t in (seat_temperatures or {}).items())


def markdown(summary: dict[str, dict[str, Any]]) -> str:
    """One row per game and measure: before, after, whether it improved, and what a random
    legal mover gets (the exploitability of the uniform policy, for poker)."""
    lines = [
        "| game | measure | before | after | improved | random mover |",
        "|---|---|---|---|---|---|",
    ]

    def add(game: str, measure: str, before: str, after: str, improved: str, rnd: str) -> None:
        lines.append(f"| {game} | {measure} | {before} | {after} | {improved} | {rnd} |")

    notes: list[str] = []
    # shown as soon as one side has it: n/a beside the random mover's rate says "all invalid"
    for game, row in summary.items():
        for label in ("before", "after"):
            if row.get(f"errors_{label}"):
                notes.append(
                    f"\n{game} {label}: {row[f'errors_{label}']} games failed and were not "
                    f"scored; the first: {row[f'first_error_{label}']}"
                )
        if not any(k != "roles" for k in row):
            continue  # a role game: its own table below
        add(
            game,
            "invalid rate",
            _interval(row, "invalid_rate_before"),
            _interval(row, "invalid_rate_after"),
            _yes(row.get("invalid_rate_improved")),
            "0 (legal moves only)",
        )
        add(
            game,
            f"score vs {RANDOM_BOT}",
            _interval(row, "score_vs_random_before"),
            _interval(row, "score_vs_random_after"),
            _yes(row.get("score_improved")),
            _interval(row, "random_baseline_score"),
        )
        if any(k.startswith("return_vs_random") for k in row):
            add(
                game,
                f"mean return vs {RANDOM_BOT}",
                _interval(row, "return_vs_random_before"),
                _interval(row, "return_vs_random_after"),
                _yes(row.get("return_improved")),
                _interval(row, "random_baseline_return"),
            )
        if "strongest_bot" in row:
            add(
                game,
                f"score vs {row['strongest_bot']} (strongest)",
                _interval(row, "score_vs_strongest_before"),
                _interval(row, "score_vs_strongest_after"),
                _yes(row.get("score_vs_strongest_improved")),
                _interval(row, "random_baseline_score_vs_strongest"),
            )
        if any(f"{k}optimal_move_rate{x}" in row for k, x in OPTIMAL_KEYS):
            add(
                game,
                f"optimal-move rate (vs {RANDOM_BOT})",
                _interval(row, "optimal_move_rate_before"),
                _interval(row, "optimal_move_rate_after"),
                _yes(row.get("optimal_move_rate_improved")),
                _interval(row, "random_baseline_optimal_move_rate"),
            )
        prefix = EXPLOITABILITY_PREFIX.get(game)
        if prefix is not None:
            _exploitability_rows(add, game, row, prefix, notes)
    if len(lines) == 2:
        lines = []  # role games only: no match table
    else:
        lines.append("")
        lines.append(
            "Improved: the after value lies beyond the 95% interval of the before value (for an "
            "exploitability, which is exact: lower). Random mover: random-v0 in the policy's "
            "seat, same games and seeds."
        )
    roles = [(game, e) for game, row in summary.items() for e in row.get("roles", ())]
    if roles:
        lines += [""] * bool(lines) + role_table(roles, notes)
    if not summary:
        lines.append("No evaluation results (eval.games: 0 skips every evaluation).")
    lines.extend(notes)
    return "\n".join(lines)


def _exploitability_rows(
    add: Callable[[str, str, str, str, str, str], None],
    game: str,
    row: dict[str, Any],
    prefix: str,
    notes: list[str],
) -> None:
    uniform = REFERENCES[prefix][0][1]
    for kind, what in (("", ""), ("_sampling", ", training sampling")):
        t = row.get(f"{prefix}_exploitability{kind}_temperature")
        if t is None:
            continue
        what = what + seats_at(row.get(f"{prefix}_exploitability{kind}_seat_temperatures"))
        before = row.get(f"{prefix}_exploitability{kind}_before")
        after = row.get(f"{prefix}_exploitability{kind}_after")
        mass_before = row.get(f"{prefix}_invalid_mass{kind}_before")
        mass_after = row.get(f"{prefix}_invalid_mass{kind}_after")
        improved = None if before is None or after is None else after < before
        add(
            game,
            f"exploitability, {_temperature(t)}{what} (chips/hand, lower is better)",
            "n/a" if before is None else f"{before:.4f}",
            "n/a" if after is None else f"{after:.4f}",
            _yes(improved),
            f"{uniform:.4f}",
        )
        mass_t = "T=1" if t == 0 else _temperature(t)
        add(
            game,
            f"invalid reply mass, {mass_t}{what}",
            "n/a" if mass_before is None else f"{mass_before:.4f}",
            "n/a" if mass_after is None else f"{mass_after:.4f}",
            _yes(None if mass_before is None or mass_after is None else mass_after < mass_before),
            "0",
        )
    references = ", ".join(f"{name} {value:.3f}" for name, value in REFERENCES[prefix])
    step = row.get(f"{prefix}_exploitability_after_step")
    read = f" After: the weights of checkpoint step {step}." if step is not None else ""
    notes.append(f"\n{game} exploitability references (chips/hand): {references}.{read}")


def write_eval_summary(
    run_dir: Path,
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    run_name: str,
    *,
    baseline: list[dict[str, Any]] | None = None,
    readings: list[dict[str, Any]] | None = None,
) -> str:
    """Write ``eval_summary.json`` and ``.md``; return the Markdown table."""
    summary = before_after(before, after, baseline, readings)
    (run_dir / "eval_summary.json").write_text(json.dumps(summary, indent=2))
    table = markdown(summary)
    (run_dir / "eval_summary.md").write_text(
        f"# {run_name}: before and after training\n\n{table}\n"
    )
    return table
