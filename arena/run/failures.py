"""Steps that leave the learner nothing to train on or that it skips, and when a run gives up.

A step whose every episode failed (a simulator that raises, returns no text, or was built
wrong; a bot that crashes) reaches the learner with no turn, and the learner answers with no
metrics. Such a step is not counted: the coordinator shows it on the console like a step line
(``failed 8/8``), names the first failure's reason in ``events.log``, and collects the step
again. A cause that lasts would fail every step the same way, so after
``rollout.max_empty_steps`` of them in a row the run stops with :class:`NothingToTrain`, whose
one-line message names the reason and the logs to read (``arena train`` exits 1 with it).

A step the learner skipped for a non-finite loss is not counted either, and is collected again
with fresh episodes: :class:`SkippedSteps` stops the run after :data:`MAX_SKIPPED` in a row.

A named policy's own learner (arena/run/policy_learners.py) can train nothing on a step the run's
learner trained (it rejected every episode of that policy, or had no turn of it): the step
counts, and :meth:`EmptySteps.untrained` tells it in ``events.log`` (and on the console), once
per step, naming the policy, what its learner rejected and its log. It does not stop the run:
the run's own policy trained, and a policy's seats may get no turn on a step for ordinary
reasons (a game mix, a population's choice of opponent); the line counts the steps in a row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from arena.bus import BusError
from arena.run.run_log import RunLog


class NothingToTrain(RuntimeError):
    """Too many steps in a row had no turn to train on; the message is one line for the user."""


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines of a traceback included) as single spaces:
    the reason is shown on a step line and as the run's last line."""
    return " ".join(text.split())


def reason_of(collected: dict[str, Any]) -> str:
    """Why a step's episodes gave nothing to train on, from its collect summary."""
    failed, played = collected["failed"], collected["failed"] + collected["episodes"]
    if not played:
        return "no episode was played"
    first = one_line(collected.get("error") or "") or "no reason given"
    if collected.get("rejected"):  # played whole, then refused by a learner as unusable
        return rejected_by(collected["rejected"])
    if failed == played:
        return f"every episode failed ({failed}/{played}); the first: {first}"
    shown = collected.get("transcript") or {}
    how = (
        f"; the first ended with {shown['termination']} after {len(shown.get('turns', []))} turns"
        if shown.get("termination")
        else ""
    )
    if not failed:  # e.g. a first prompt already longer than the context: context_overflow
        return f"none of the {played} episodes failed, but none had a turn to train on{how}"
    return (
        f"{failed}/{played} episodes failed (the first: {first}), the others had no trained "
        f"turn{how}"
    )


Asker = Callable[[str], Awaitable[Any]]
"""Asks a learner ``op`` (``status``) and returns its reply."""


class Rejections:
    """The episodes the learners rejected as unusable, told to a step that trained nothing: a
    model whose replies carry NaN log-probabilities plays whole episodes (none failed) that no
    step can use, and the step's reason should say so. Every learner of the run is asked: its
    own (``learner``) and each named policy's with a model of its own (``learner-<policy>``,
    arena/run/policy_learners.py), each named with its own log."""

    def __init__(self, learners: Callable[[], list[tuple[str, Asker]]]) -> None:
        self.learners = learners
        """Each learner's actor name (its log is ``logs/<name>.log``) and how to ask it."""
        self.seen: dict[str, int] = {}
        """Each learner's ``rejected_bad_record`` count when last asked."""

    async def note(
        self, metrics: dict[str, Any] | None, collected: dict[str, Any], idle: Sequence[str] = ()
    ) -> None:
        """On a step that trained nothing (``metrics`` without a step), put each learner's
        rejections since the last look, with its last reason, into ``collected["rejected"]``
        (``[{"learner": name, "count": n, "last": reason}]``, read by :func:`reason_of` and
        :class:`EmptySteps`). On a step the run's learner trained, the same for the learners
        named in ``idle`` (named policies' own learners that trained nothing), which go into
        ``collected["idle"]``."""
        trained = metrics is not None and "step" in metrics
        if trained and not idle:
            return
        if trained:
            collected["idle"] = list(idle)
        told = []
        for name, ask in self.learners():
            if trained and name not in idle:
                continue
            try:
                status = await ask("status")
            except BusError:
                continue
            rejected = int((status.get("counters") or {}).get("rejected_bad_record", 0))
            new, self.seen[name] = rejected - self.seen.get(name, 0), rejected
            if new > 0:
                told.append({"learner": name, "count": new, "last": status.get("last_rejection")})
        if told:
            collected["rejected"] = told


def rejected_by(told: list[dict[str, Any]]) -> str:
    """The rejections of :meth:`Rejections.note`, one clause per learner."""
    return "; ".join(
        f"{'the learner' if r['learner'] == 'learner' else r['learner']} rejected {r['count']} "
        f"episodes as unusable (the last: {one_line(r.get('last') or '') or 'no reason given'})"
        for r in told
    )


class EmptySteps:
    """Counts the steps in a row with nothing to train on; see the module docstring."""

    def __init__(self, limit: int, run_dir: Path, log: RunLog) -> None:
        self.limit = limit
        self.run_dir = run_dir
        self.log = log
        self.in_a_row = 0
        self.idle_in_a_row: dict[str, int] = {}
        """Each named policy's learner's steps in a row that trained nothing while the run's did."""

    def untrained(
        self, metrics: dict[str, Any] | None, step: int, collected: dict[str, Any]
    ) -> bool:
        """Whether the learner's reply ``metrics`` to step ``step`` trained nothing (None, or no
        ``step`` in it); if so the step is shown and logged, and :class:`NothingToTrain` is
        raised once ``limit`` such steps came in a row. A step that trained resets the count, and
        tells each named policy's learner that trained nothing (``collected["idle"]``)."""
        if metrics is not None and "step" in metrics:
            self.in_a_row = 0
            self._idle(step, collected)
            return False
        self.in_a_row += 1
        failed, played = collected["failed"], collected["failed"] + collected["episodes"]
        reason = reason_of(collected)
        self.log.console.print(
            f"step {step}/{self.log.config.steps}  no update: no turn to train on  "
            f"failed {failed}/{played}"
        )
        self.log.event(
            f"step {step}: no turn to train on ({self.in_a_row} in a row; the run stops after "
            f"{self.limit}, rollout.max_empty_steps): {reason}"
        )
        if self.in_a_row >= self.limit:
            names = [r["learner"] for r in collected.get("rejected") or []] or ["rollout-*"]
            logs = [str(self.run_dir / "logs" / f"{name}.log") for name in names]
            raise NothingToTrain(
                f"stopped after {self.in_a_row} steps in a row with no turn to train on: "
                f"{reason}; read {', '.join([str(self.run_dir / 'events.log'), *logs[:-1]])} "
                f"and {logs[-1]}"
            )
        return True

    def _idle(self, step: int, collected: dict[str, Any]) -> None:
        """One ``events.log`` line for each named policy's learner that trained nothing on step
        ``step`` while the run's learner trained (see the module docstring)."""
        idle = collected.get("idle") or []
        self.idle_in_a_row = {n: self.idle_in_a_row.get(n, 0) + 1 for n in idle}
        rejected = {r["learner"]: r for r in collected.get("rejected") or []}
        for name in idle:
            why = (
                rejected_by([rejected[name]]).removeprefix(f"{name} ")
                if name in rejected
                else "had no turn to train on"
            )
            self.log.event(
                f"step {step}: policy {name.removeprefix('learner-')} trained nothing "
                f"({self.idle_in_a_row[name]} in a row; the run goes on): its learner {why}; "
                f"read {self.run_dir / 'logs' / f'{name}.log'}"
            )


MAX_SKIPPED = 5
"""Steps in a row the learner may skip for non-finite losses before the run stops."""


class SkippedSteps:
    """The run's step from the learner's replies: the learner's step count is the run's (it
    counts every batch, even one whose turns carried no signal), and a step it skipped for a
    non-finite loss is retried with fresh episodes, :data:`MAX_SKIPPED` times in a row at most."""

    def __init__(self, log: RunLog) -> None:
        self.log = log
        self.in_a_row = 0

    def next_step(self, metrics: dict[str, Any] | None, step: int) -> int:
        """The run's step after the learner's reply ``metrics`` to the step after ``step``."""
        if metrics is None or "step" not in metrics:
            raise RuntimeError("the learner had no turns to train on; did every episode fail?")
        learned = int(metrics["step"])
        if learned != step:
            self.in_a_row = 0
            return learned
        self.in_a_row += 1
        self.log.event(
            f"learner skipped step {learned + 1} ({self.in_a_row} in a row): non-finite loss"
        )
        if self.in_a_row >= MAX_SKIPPED:
            raise RuntimeError(
                f"the learner skipped {MAX_SKIPPED} steps in a row (non-finite losses)"
            )
        return learned
