"""arena/run/watch.py: a long wait says what it waits for and on whom.

The unit tests read a hand-written directory listing. The end-to-end check (a rollout actor of a
real `arena train` run stopped with SIGSTOP is named, with its heartbeat age, in `events.log` and
`arena status`, and the run completes once it resumes) shares its run with the staleness bound's:
`tests/arena/run/test_staleness_bound.py`.

Run with `.venv/bin/python -m pytest -q tests/arena/run/test_watch.py`.
"""

from __future__ import annotations

import asyncio
import contextlib

from arena.bus import BusError
from arena.run.watch import Watchdog, diagnosis

LISTING = [
    {"name": "inference-0", "status": {"policy_version": 1}, "last_heartbeat": 0.4},
    {"name": "rollout-1", "status": {}, "last_heartbeat": 29.6},
]


def test_the_diagnosis_names_versions_heartbeats_and_missing_actors() -> None:
    assert diagnosis(LISTING, ["inference-0", "rollout-1", "learner"]) == (
        "inference-0 serves v1, last heartbeat 0 s ago; rollout-1 last heartbeat 30 s ago; "
        "learner is not registered with the broker"
    )


def test_the_watchdog_reports_while_the_wait_lasts_and_stops_after() -> None:
    reports: list[str] = []

    async def listing() -> list[dict]:
        return LISTING

    async def until(count: int) -> None:  # the event, not the clock: a loaded host is slow
        while len(reports) < count:
            await asyncio.sleep(0.01)

    async def main() -> int:
        watchdog = Watchdog(reports.append, listing, every=0.05)
        async with watchdog.waiting("step 7: waiting for weights v2", ["inference-0"]):
            await asyncio.wait_for(until(2), 30)
        ended = len(reports)
        await asyncio.sleep(0.15)  # three periods: no report once the block has ended
        return ended

    seen: list[list[str]] = []

    async def main_watching_current() -> None:
        watchdog = Watchdog(reports.append, listing, every=0.05)
        async with watchdog.waiting("step 7: waiting for weights v2", ["inference-0"]):
            await asyncio.wait_for(until(len(reports) + 1), 30)
            seen.append(watchdog.current())
        seen.append(watchdog.current())

    ended = asyncio.run(main())
    assert len(reports) == ended >= 2, reports
    asyncio.run(main_watching_current())
    # while the wait lasts its latest report is current (what `arena status` shows), then not
    assert seen[0] == [reports[-1]] and seen[1] == []
    assert reports[0].startswith("step 7: waiting for weights v2 for 0 s; inference-0 serves v1")

    async def broken() -> list[dict]:
        raise BusError("timeout", "no reply")

    async def silent_broker() -> None:
        async with Watchdog(reports.append, broken, every=0.05).waiting("step 1", ["learner"]):
            await asyncio.wait_for(until(len(reports) + 1), 30)

    asyncio.run(silent_broker())
    assert "the broker does not answer" in reports[-1]


def test_a_wait_cancelled_while_it_stops_its_reporter_stays_cancelled() -> None:
    """The run's end cancels every task (asyncio.run). A learner request that failed (its actor
    closed) was leaving its wait, awaiting the stopped reporter, when the cancel came: the cancel
    went to the reporter, whose CancelledError the wait swallowed, and the request went on to
    wait wait.timeout (600 s) for a learner that was gone: the run hung after its disk filled
    (bench/chaos.py --overlap, a run with a named policy's learner)."""

    async def listing() -> list[dict]:
        return LISTING

    async def main() -> bool:
        watchdog = Watchdog(lambda line: None, listing, every=30)
        reply: asyncio.Future = asyncio.get_running_loop().create_future()

        async def request() -> None:
            try:
                async with watchdog.waiting("waiting for the learner's step", ["learner"]):
                    await reply
            except BusError:
                await asyncio.sleep(600)  # the wait for a learner to answer again

        task = asyncio.create_task(request())
        await asyncio.sleep(0)  # it awaits the reply
        reply.set_exception(BusError("closed", "actor trainer closed"))
        await asyncio.sleep(0)  # it leaves the block: stops its reporter and awaits it
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), 5)
        ended = task.done()
        task.cancel()  # without the fix: it sleeps on; end it here
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return ended and watchdog.current() == []

    assert asyncio.run(main())
