"""What a run writes and shows: metrics, events, transcripts, evaluations and the console.

Files in the run directory:

- ``metrics.jsonl``: one line per learner step (learner metrics, rollout stats, timings);
- ``evals.jsonl``: one line per evaluation (label, step, ``results``: one entry per game and
  opponent, ``roles``: one per role game's seat and metric; the label ``baseline`` is the
  random mover's, ``strategy`` the exploitability readings);
- ``eval_before.json``, ``eval_baseline.json``: those evaluations whole, for a resumed run,
  each row with the settings it was measured under (:data:`SETTINGS`, :func:`reading_settings`);
- ``events.log``: restarts, refused weight updates, failed (dropped) episodes with the first
  one's reason, and other incidents; created by the first event, so a run without any has none;
- ``transcripts.jsonl``: sampled episodes as conversations, each turn marked ``trained``
  (False: a bot's, a simulator's or a frozen policy's turn, masked out of the loss);
- ``tb/``: TensorBoard event files (when tensorboard is installed).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from arena.eval.evaluate import MatchResult
from arena.eval.progress import Progress
from arena.eval.roles import RoleResult
from arena.eval.strategy_reading import StrategyReading
from arena.eval.summary import seats_at
from arena.run.config import EvalConfig, RunConfig
from arena.run.tensorboard import scalar_writer

SETTINGS = "eval_settings"
"""The key of each row of ``eval_before.json`` and ``eval_baseline.json`` holding the settings it
was measured under (:func:`reading_settings`): a resumed run with other settings does not compare
its readings with those (arena/run/resume.py). A row without it is from an older run."""


def reading_settings(config: EvalConfig, label: str) -> dict[str, Any]:
    """What a ``before`` or ``baseline`` evaluation's figures depend on beyond the fixed game and
    seed: the games per match (``eval.games``), the opponents of the evaluations after it
    (``eval.opponents``) and, for the policy's (not the random mover's), ``eval.temperature``."""
    settings: dict[str, Any] = {"games": config.games, "opponents": list(config.opponents)}
    if label != "baseline":
        settings["temperature"] = config.temperature
    return settings


class RunLog:
    """Append-only logs of one run plus a console view."""

    def __init__(self, run_dir: Path, config: RunConfig) -> None:
        self.run_dir = run_dir
        self.config = config
        # Logs and CI capture the console: keep lines whole there instead of wrapping at 80.
        self.console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
        self._tb = scalar_writer(run_dir / "tb")
        self._started = time.monotonic()
        self._advance_step: Callable[[], None] | None = None

    # -- console ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def progress(self, label: str, total: int, completed: int = 0) -> Iterator[Callable[[], None]]:
        """A progress bar over ``total`` items (a line every 30 s off a terminal); yields the
        function that advances it."""
        with Progress(label, total, completed=completed, console=self.console) as progress:
            yield progress.advance

    @contextlib.contextmanager
    def training(self, first_step: int) -> Iterator[None]:
        """The training steps' progress bar; each logged :meth:`step` advances it."""
        with self.progress("train", self.config.steps, completed=first_step) as advance:
            self._advance_step = advance
            try:
                yield
            finally:
                self._advance_step = None

    def verbatim(self, text: str) -> None:
        """``text`` as it is: never wrapped (a command line a user copies, from a terminal or a
        log, must stay one line) nor read as markup."""
        self.console.print(text, soft_wrap=True, markup=False, highlight=False)

    def event(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        # "[openspiel]" is not markup, and a command line in an event stays one line to copy
        self.console.print(f"[yellow]{stamp} {escape(text)}", soft_wrap=True)
        with open(self.run_dir / "events.log", "a") as out:
            out.write(f"{stamp} {text}\n")

    # -- steps -----------------------------------------------------------------------------
    def step(
        self,
        step: int,
        metrics: dict[str, Any],
        collected: dict[str, Any],
        *,
        collect_s: float,
        train_s: float,
        learner_version: int,
        overlapped: bool = False,
        leases: dict[str, int] | None = None,
    ) -> None:
        """Log one step. ``collected`` summarizes the episodes it consumed; in ``overlapped``
        (async) mode they were generated over the whole step, training time included.
        ``leases`` are the run's lease counters so far (``leases/*``)."""
        seconds = collect_s + train_s
        generating = seconds if overlapped else collect_s or collected["seconds"]
        row = {
            "step": step,
            "time": round(time.monotonic() - self._started, 2),
            "episodes": collected["episodes"],
            "episodes_failed": collected["failed"],
            "episodes_per_s": collected["episodes"] / max(seconds, 1e-9),
            "gen_tokens_per_s": collected["generated_tokens"] / max(generating, 1e-9),
            # turns by choice: each prompt and all its candidate replies, as scored
            "scored_tokens": collected.get("scored_tokens", 0),
            "scored_tokens_per_s": collected.get("scored_tokens", 0) / max(generating, 1e-9),
            "staleness": max(0, learner_version - collected["min_version"])
            if collected["min_version"] >= 0
            else 0,
            "collect_s": round(collect_s, 2),
            "train_s": round(train_s, 2),
            **{f"reward/{k}": v for k, v in collected["reward"].items()},
            **{f"invalid_rate/{k}": v for k, v in collected["invalid_rate"].items()},
            **{f"learner/{k}": v for k, v in metrics.items() if isinstance(v, (int, float))},
            **{f"leases/{k}": v for k, v in (leases or {}).items()},
        }
        self._append("metrics.jsonl", row)
        for key, value in row.items():
            if self._tb is not None and isinstance(value, (int, float)) and key != "step":
                self._tb.add_scalar(key, value, step)
        rewards = " ".join(f"{k}={v:+.2f}" for k, v in collected["reward"].items())
        invalid = " ".join(f"{k}={v:.0%}" for k, v in collected["invalid_rate"].items())
        failed = collected["failed"]
        self.console.print(
            f"step {step}/{self.config.steps}  {row['episodes_per_s']:.2f} ep/s  "
            f"{row['gen_tokens_per_s']:.0f} gen tok/s  {update_text(metrics)}  "
            f"reward {rewards}  invalid {invalid}  staleness {row['staleness']}"
            + (f"  failed {failed}/{failed + collected['episodes']}" if failed else "")
        )
        if failed:  # dropped episodes are never trained on: say so where a user looks
            self.event(
                f"step {step}: {failed} episode{'s' if failed > 1 else ''} failed and "
                f"{'were' if failed > 1 else 'was'} dropped; the first: "
                f"{collected.get('error') or 'no reason given'}"
            )
        if self._advance_step is not None:
            self._advance_step()
        every = self.config.rollout.transcripts_every
        if every and step % every == 0 and collected.get("transcript"):
            self._append("transcripts.jsonl", {"step": step, **collected["transcript"]})

    def resume_at(self, step: int) -> None:
        """Align ``metrics.jsonl`` with a resumed learner at ``step``.

        Rows past the checkpoint are dropped (those steps run again). Steps the checkpoint holds
        but the log lacks (the launcher died between the update and its log line) get a row
        marked ``recovered``: the update happened, its metrics died with the launcher. So does
        a step whose row was cut short (its append stopped by a full disk or a kill: a last
        line with no end, which is dropped and named in the event log; it once failed the
        resume of a run whose disk had filled with a JSONDecodeError). The log is rewritten
        beside and renamed over the old one, so a kill mid-rewrite loses no row.
        """
        path = self.run_dir / "metrics.jsonl"
        text = path.read_text(errors="replace") if path.exists() else ""
        lines = [line for line in text.splitlines() if line.strip()]
        if lines and not text.endswith("\n") and _metrics_row(lines[-1]) is None:
            cut = lines.pop()  # the last append did not finish
            self.event(
                f"metrics.jsonl: its last row was cut short ({len(cut)} characters, no end: "
                "a full disk or a kill while it was written); dropped, its step runs again "
                "or is marked recovered"
            )
        rows = []
        for number, line in enumerate(lines, 1):
            row = _metrics_row(line)
            if row is None:  # a row cut short that later appends followed, or an edit
                self.event(
                    f"metrics.jsonl: line {number} is not a row of metrics (a JSON object with "
                    f"an integer step): {line[:80]!r}; dropped, its step runs again or is "
                    "marked recovered"
                )
            elif row["step"] <= step:
                rows.append(row)
        logged = {r["step"] for r in rows}
        rows += [{"step": s, "recovered": True} for s in range(1, step + 1) if s not in logged]
        if rows or path.exists():
            ordered = sorted(rows, key=lambda r: r["step"])
            replace_text(path, "".join(json.dumps(r) + "\n" for r in ordered))

    # -- evaluation ------------------------------------------------------------------------
    def evaluation(
        self,
        label: str,
        step: int,
        results: list[MatchResult],
        roles: Sequence[RoleResult] = (),
    ) -> None:
        """Log one evaluation: ``results`` against opponents, ``roles`` the role games' metrics
        (``baseline``: the random mover's, not on TensorBoard). One ``evals.jsonl`` line holds
        both (``results``; ``roles`` when there are any). The ``before`` and ``baseline`` ones
        are also kept whole (``eval_<label>.json``, role rows after the others): a resumed run
        reuses them rather than measuring again what training has changed since."""
        rows = [r.to_dict() for r in results]
        role_rows = [r.to_dict() for r in roles]
        line: dict[str, Any] = {"label": label, "step": step, "results": rows}
        if role_rows:
            line["roles"] = role_rows
        self._append("evals.jsonl", line)
        if label in ("before", "baseline"):
            settings = reading_settings(self.config.eval, label)
            kept = [{**row, SETTINGS: settings} for row in rows + role_rows]
            replace_text(self.run_dir / f"eval_{label}.json", json.dumps(kept, indent=1))
        for r in results:
            self.verbatim(f"eval {label}: {r.line()}")  # a game's error may hold "[seat]"
            if self._tb is not None and label != "baseline" and r.games:
                prefix = f"eval/{r.game}/{r.opponent}" + (f"/{r.policy}" if r.policy else "")
                self._tb.add_scalar(f"{prefix}/score", r.score, step)
                self._tb.add_scalar(f"{prefix}/invalid_rate", r.invalid_rate, step)
                if r.optimal_move_rate is not None:
                    self._tb.add_scalar(f"{prefix}/optimal_move_rate", r.optimal_move_rate, step)
        shown: set[tuple[str, str]] = set()
        for role in roles:
            if (role.game, role.seat) not in shown:  # what the seat played against, once
                shown.add((role.game, role.seat))
                self.verbatim(f"eval {label}: {role.seats_line()}")
            self.verbatim(f"eval {label}: {role.line()}")
            if self._tb is not None and role.mean is not None:
                self._tb.add_scalar(f"eval/{role.game}/{role.seat}/{role.metric}", role.mean, step)

    def strategy(self, readings: list[StrategyReading]) -> None:
        """Log exploitability readings: a line each on the console, a row in ``evals.jsonl``."""
        for r in readings:
            temperature = "greedy" if r.temperature == 0 else f"T={r.temperature:g}"
            what = f" (training sampling{seats_at(r.seat_temperatures)})" if r.sampling else ""
            self.console.print(
                f"strategy {r.label}: {r.game} exploitability {r.exploitability:.4f} at "
                f"{temperature}{what}, invalid reply mass {r.invalid_mass:.3f}  "
                f"(step {r.step}, read in {r.seconds:.1f} s)"
            )
            if self._tb is not None and not r.sampling:
                self._tb.add_scalar(f"eval/{r.game}/exploitability", r.exploitability, r.step)
        if readings:
            self._append(
                "evals.jsonl", {"label": "strategy", "readings": [r.to_dict() for r in readings]}
            )

    def load_eval(self, label: str) -> list[dict[str, Any]] | None:
        """The evaluation saved as ``eval_<label>.json``, or None where there is none. One that
        cannot be read (cut short, edited) is moved aside to ``eval_<label>.json.damaged``,
        named in the event log, and read as none: a resume must not fail on it, nor write over
        it."""
        path = self.run_dir / f"eval_{label}.json"
        if not path.exists():
            return None
        try:
            rows = json.loads(path.read_bytes())
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise ValueError(f"a JSON {type(rows).__name__}, not a list of rows")
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            aside = path.with_name(path.name + ".damaged")
            path.replace(aside)
            self.event(
                f"{path.name} cannot be read ({type(err).__name__}: {err}); moved to "
                f"{aside.name} and read as no saved evaluation"
            )
            return None
        return rows

    def finish(self, summary: str, *, episodes_per_s: float, mode: str) -> None:
        self.verbatim(summary)  # Markdown, whose "[...]" is no markup
        self.console.print(f"{mode} mode: {episodes_per_s:.3f} episodes/s over the training steps")
        staleness = self.staleness()
        if staleness:
            self.console.print(
                f"staleness of the trained turns: p50 {staleness['staleness_p50']:g} (median "
                f"over the steps), max {staleness['staleness_max']:g} versions; dropped for "
                f"staleness {staleness['stale_rejected']:g}, down-weighted "
                f"{staleness['stale_downweighted']:g}"
            )
        self._append(
            "run_summary.jsonl",
            {
                "mode": mode,
                "episodes_per_s": episodes_per_s,
                "wall_s": time.monotonic() - self._started,
                **staleness,
            },
        )
        if self._tb is not None:
            self._tb.close()

    def staleness(self) -> dict[str, float]:
        """The staleness of the run's trained turns, from ``metrics.jsonl``: the median of the
        steps' p50s, the largest max, and the turns dropped or down-weighted for staleness
        (empty before any step)."""
        path = self.run_dir / "metrics.jsonl"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        rows = [r for r in map(_metrics_row, lines) if r and "learner/staleness_max" in r]
        if not rows:
            return {}
        return {
            "staleness_p50": float(statistics.median(r["learner/staleness_p50"] for r in rows)),
            "staleness_max": float(max(r["learner/staleness_max"] for r in rows)),
            "stale_rejected": float(
                sum(r.get("learner/filtered/stale_rejected", 0.0) for r in rows)
            ),
            "stale_downweighted": float(
                sum(r.get("learner/filtered/stale_downweighted", 0.0) for r in rows)
            ),
        }

    def _append(self, name: str, row: dict[str, Any]) -> None:
        with open(self.run_dir / name, "a") as out:
            out.write(json.dumps(row, default=_plain) + "\n")


def _metrics_row(line: str) -> dict[str, Any] | None:
    """A line of ``metrics.jsonl`` read: None for one that is not a JSON object with an
    integer ``step`` (cut short by a kill or a full disk, or edited)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or type(row.get("step")) is not int:
        return None
    return row


def update_text(metrics: dict[str, Any]) -> str:
    """The learner's step on the console: loss and entropy (nats per generated token; the
    per-state step: its states, their mean target move in log-odds and the legal policy's mean
    entropy over its turns), or why
    nothing was trained (e.g. every turn of a GRPO batch had advantage 0: the groups had no
    spread, a sign that sampling has collapsed)."""
    if metrics.get("per_state/states"):
        return (
            f"per-state step: {int(metrics['per_state/states'])} states, target move "
            f"{metrics['per_state/target_move']:.3f}  entropy {metrics['entropy']:.3f}"
        )
    if "loss" in metrics:
        entropy = metrics.get("entropy")
        return f"loss {metrics['loss']:.4f}" + (
            f"  entropy {entropy:.3f}" if isinstance(entropy, (int, float)) else ""
        )
    filtered = {
        k.removeprefix("filtered/"): int(v)
        for k, v in metrics.items()
        if k.startswith("filtered/") and v
    }
    if not filtered:
        return "no update"
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(filtered.items()))
    return f"no update ({sum(filtered.values())} turns filtered: {reasons})"


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: beside it, then renamed over it, so a
    kill or a full disk mid-write leaves the old file (or none), never a cut one that a resume
    would fail to read."""
    new = path.with_name(f".{path.name}.new")
    try:
        new.write_text(text)
        new.replace(path)
    finally:
        new.unlink(missing_ok=True)
