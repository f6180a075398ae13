"""A learner killed with SIGKILL under ``arena train``: the launcher restarts it, the new one
resumes from the last checkpoint, and the run goes back to that step and completes.

The run trains configs/smoke.yaml (the tiny model) for 6 steps with a checkpoint every 3, and
the learner dies once step 4 is logged: the inference actors then serve a version (4, or 5 if
the kill lands after the next update) that no checkpoint holds, and the last checkpoint is step
3's (step 6, the next, is two updates away). The restarted learner starts at step 3 and rolls
them back to version 3; the run drops its rows past step 3 and trains steps 4 to 6 again,
without ``resume=``. Every step reports
the episodes discarded for being newer than the learner (``learner/count/discarded_newer_version``;
how many there are depends on where the kill lands, and tests/trainers/test_learner_restart.py
pins the discarding itself).

The unit tests below lose the reply of a learner's ``step`` on a real bus in three ways (the
step ran, the request never arrived, the step was still running) and check that
:meth:`LearnerClient.step` recovers each from the learner's ``status``.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_learner_restart.py``.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from arena.bus import Actor, BusError, Message
from arena.run.learner_restart import LearnerClient, LearnerRestarted
from arena.run.watch import Watchdog
from tests.arena.commands.test_train import (
    SMOKE,
    metrics,
    pids_of,
    run_logs,
    start,
)


def learner_pids(run_dir: Path) -> list[int]:
    """The learner process of the run in ``run_dir``."""
    return [
        p
        for p in pids_of(" learner --address ")
        if str(run_dir) in Path(f"/proc/{p}/cmdline").read_text()
    ]


def served_versions(log: Path) -> list[int]:
    """The versions an inference actor applied, in order, from its log."""
    return [int(v) for v in re.findall(r"serves version (\d+)", log.read_text())]


@pytest.mark.e2e
def test_a_killed_learner_is_restarted_and_the_run_continues_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    # no evaluation before or after (nothing here reads it); the per-step strategy reads stay
    # (eval.games=0 would stop them), as they pace the steps for the kill below
    proc = start(
        "train",
        SMOKE,
        f"run_dir={run_dir}",
        "steps=6",
        "checkpoint_every=3",
        "eval.games=0",
        "eval.exploitability=true",
    )
    out = ""
    try:
        deadline = time.monotonic() + 300
        while len(metrics(run_dir)) < 4:  # polled often: the kill must come before step 6
            assert time.monotonic() < deadline and proc.poll() is None, "no 4 steps"
            time.sleep(0.05)
        victim = learner_pids(run_dir)
        assert len(victim) == 1, victim
        os.kill(victim[0], signal.SIGKILL)
        # well within pytest's timeout, so that a hung run still shows its logs
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"the run hung after its learner was killed\n{run_logs(run_dir, out)}")
    finally:
        proc.kill()
    assert proc.returncode == 0, run_logs(run_dir, out)
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6], run_logs(run_dir, out)
    events = (run_dir / "events.log").read_text()
    assert f"learner (pid {victim[0]}) exited with code -9; restarting (1/3)" in events
    # the new learner started from the checkpoint of step 3, and the run went back there
    assert re.search(r"the learner restarted \(epoch \d+\) from its checkpoint at step 3", events)
    assert "continuing from step 3" in events
    learner_log = (run_dir / "logs" / "learner.log").read_text()
    assert re.search(r"resumed from \S+step-00000003 at step 3", learner_log)
    # inference-0 served a version of the dead learner's past 3, then exactly the checkpoint's
    versions = served_versions(run_dir / "logs" / "inference-0.log")
    back = next(i for i in range(1, len(versions)) if versions[i] < versions[i - 1])
    assert versions[:4] == [1, 2, 3, 4] and versions[back] == 3, versions
    assert versions[back:] == [3, 4, 5, 6], versions
    # every step reports what was discarded as newer than the learner
    assert all("learner/count/discarded_newer_version" in r for r in rows), rows
    assert (run_dir / "eval_summary.json").exists()
    assert not pids_of(str(run_dir)), "children outlived the run"


async def no_actors() -> list[dict[str, Any]]:
    return []


def quiet_watchdog() -> Watchdog:
    return Watchdog(lambda line: None, no_actors, 30.0)


class FakeLearner:
    """Service ``learner`` with the status fields the client reads; a step trains for
    ``seconds`` (``training`` meanwhile), then moves to the next version."""

    def __init__(self, seconds: float = 0.0, epoch: int = 7) -> None:
        self.version, self.pending, self.training = 0, 4, False
        self.seconds, self.epoch, self.steps_asked = seconds, epoch, 0
        self.asked_at: list[int | None] = []
        """The run's step each ``step`` that arrived was asked as (``at``)."""

    async def __call__(self, msg: Message) -> Any:
        if msg.body["op"] == "status":
            return {
                "step": self.version,
                "version": self.version,
                "epoch": self.epoch,
                "pending": self.pending,
                "training": self.training,
                "metrics": {"version": float(self.version), "samples": 4.0},
            }
        self.steps_asked += 1
        self.asked_at.append(msg.body.get("at"))
        self.training, self.pending = True, 0
        await asyncio.sleep(self.seconds)
        self.version += 1
        self.training = False
        return {"version": float(self.version), "samples": 4.0}


async def lose_first_step(broker: str, learner: FakeLearner, how: str) -> tuple[Any, LearnerClient]:
    """Ask for a step whose first reply is lost ``how``: ``ran`` (the learner stepped),
    ``never_arrived`` (it never got the request), ``running`` (lost while it trains)."""
    server = Actor("learner", broker, services={"learner": learner}, heartbeat_interval=0.2)
    trainer = Actor("trainer", broker, heartbeat_interval=0.2)
    await server.start()
    await trainer.start()
    client = LearnerClient(trainer, quiet_watchdog(), timeout=10, poll=0.05)
    real = client._request
    lost = BusError("actor_dead", "learner: connection lost (the actor died or its host ...)")

    async def losing(op: str, timeout: float, *at: int) -> Any:
        if op != "step" or learner.steps_asked + (how == "never_arrived") > 1:
            return await real(op, timeout, *at)
        if how == "never_arrived":
            learner.steps_asked += 1  # counted as asked, never delivered
            raise lost
        reply = asyncio.ensure_future(real(op, timeout, *at))
        if how == "ran":
            await reply
        else:
            while not learner.training:
                await asyncio.sleep(0.01)
        raise lost

    client._request = losing  # type: ignore[method-assign]
    try:  # asked as the run's step 3 (a named policy's learner)
        return await client.step(0, timeout=30, at=3), client
    finally:
        await trainer.close()
        await server.close()


@pytest.mark.parametrize("how", ["ran", "never_arrived", "running"])
def test_a_lost_step_reply_is_recovered_from_the_learners_status(broker: str, how: str) -> None:
    learner = FakeLearner(seconds=0.5 if how == "running" else 0.0)
    metrics, client = asyncio.run(lose_first_step(broker, learner, how))
    assert metrics == {"version": 1.0, "samples": 4.0}
    assert learner.version == 1  # one update: a step that ran is never asked for again
    assert client.restarts == 0
    assert learner.asked_at == [3]  # asked again as the same run step


def test_a_lost_step_reply_from_a_restarted_learner_is_a_restart(broker: str) -> None:
    async def scenario() -> None:
        learner = FakeLearner()
        server = Actor("learner", broker, services={"learner": learner}, heartbeat_interval=0.2)
        trainer = Actor("trainer", broker, heartbeat_interval=0.2)
        await server.start()
        await trainer.start()
        client = LearnerClient(trainer, quiet_watchdog(), 10, poll=0.05)
        try:
            await client("status")  # the run knows epoch 7
            learner.epoch = 8  # a new process answers from here on
            real = client._request

            async def dead(op: str, timeout: float) -> Any:
                if op == "step":
                    raise BusError("actor_dead", "learner: connection lost")
                return await real(op, timeout)

            client._request = dead  # type: ignore[method-assign]
            with pytest.raises(LearnerRestarted):
                await client.step(0, timeout=30)
        finally:
            await trainer.close()
            await server.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("op", ["status", "step"])
def test_a_request_before_the_learner_registers_again_is_asked_again(broker: str, op: str) -> None:
    """After a broker restart the trainer may register again before the learner does: its
    request then finds no actor offering ``learner`` (``unknown_service``). It never reached a
    learner, so once the learner answers it is asked again (the run failed here before)."""

    async def scenario() -> Any:
        learner = FakeLearner()
        trainer = Actor("trainer", broker, heartbeat_interval=0.2)
        await trainer.start()
        client = LearnerClient(trainer, quiet_watchdog(), timeout=10, poll=0.05)
        server = Actor("learner", broker, services={"learner": learner}, heartbeat_interval=0.2)

        async def register_late() -> None:
            await asyncio.sleep(0.5)
            await server.start()

        late = asyncio.ensure_future(register_late())
        try:
            if op == "step":
                return await client.step(0, timeout=30), learner
            return await client("status"), learner
        finally:
            await late
            await trainer.close()
            await server.close()

    reply, learner = asyncio.run(scenario())
    if op == "step":
        assert reply == {"version": 1.0, "samples": 4.0} and learner.steps_asked == 1
    else:
        assert reply["epoch"] == 7 and reply["step"] == 0


@pytest.mark.parametrize("resumed_at", [6, 3])
def test_a_learner_that_died_saving_the_final_checkpoint(broker: str, resumed_at: int) -> None:
    """The run's last step is 6. The learner dies saving its checkpoint, and its restart resumed
    from step ``resumed_at``: from 6 (it had saved) the checkpoint is simply asked again; from 3
    it lost steps 4 to 6, so :class:`LearnerRestarted` sends the run back to train them (the run
    failed with a traceback and 'continue the run with resume=' before)."""

    async def scenario() -> tuple[Any, list[str]]:
        learner = FakeLearner()
        learner.version = 6
        asked: list[str] = []
        server = Actor("learner", broker, services={"learner": learner}, heartbeat_interval=0.2)
        trainer = Actor("trainer", broker, heartbeat_interval=0.2)
        await server.start()
        await trainer.start()
        client = LearnerClient(trainer, quiet_watchdog(), 10, poll=0.05)
        real = client._request

        async def dies_saving(op: str, timeout: float, *at: int) -> Any:
            asked.append(op)
            if op == "checkpoint" and asked.count("checkpoint") == 1:
                learner.epoch, learner.version = 8, resumed_at  # the restarted one answers
                raise BusError("actor_dead", "learner: connection lost")
            if op == "checkpoint":
                return {"path": "checkpoints/step-00000006"}
            return await real(op, timeout, *at)

        try:
            await client("status")  # the run knows epoch 7
            client._request = dies_saving  # type: ignore[method-assign]
            return await client.final_checkpoint(6), asked
        finally:
            await trainer.close()
            await server.close()

    if resumed_at == 6:
        saved, asked = asyncio.run(scenario())
        assert saved == {"path": "checkpoints/step-00000006"}
        assert asked.count("checkpoint") == 2
    else:
        with pytest.raises(LearnerRestarted) as info:
            asyncio.run(scenario())
        assert info.value.status["step"] == 3 and info.value.status["epoch"] == 8
