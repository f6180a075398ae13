"""ScriptedUser's ``latency``: each reply waits that long with asyncio.sleep (the event loop
stays free, so concurrent episodes overlap their waits), and the reply itself is unchanged.
Also: configs/smoke_tools.yaml, the tool-latency variant bench/scale.py runs, loads, plans and
trains (two sync steps, whose collects wait on the user and whose turns are 0 versions old).

Run with `.venv/bin/python -m pytest -q tests/simulators/test_scripted_user_latency.py`.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

import simulators
from arena.run.config import load_run_config
from arena.run.plan import plan
from arena.run.validation import validate
from simulators.base import SimulatorView
from simulators.scripted_user import ScriptedUser

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = {
    "request": "Hi, I'd like to cancel an order.",
    "facts": ["My email is ana@example.com."],
    "fact_keywords": [["email"]],
    "done_markers": ["cancelled"],
}
VIEW = SimulatorView("retail-v0", "user", "", "", (), CONTEXT, turn=0)


def test_default_has_no_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    user = ScriptedUser()
    assert user.latency == 0.0

    async def no_wait(seconds: float) -> None:  # the event, not the clock: nothing may wait
        raise AssertionError(f"a reply without latency waited {seconds} s")

    monkeypatch.setattr("simulators.scripted_user.asyncio.sleep", no_wait)
    assert asyncio.run(user.respond(VIEW)) == CONTEXT["request"]


def test_a_reply_waits_the_latency_and_is_unchanged() -> None:
    user = simulators.make("scripted-user-v0", latency=0.2)  # how a run config builds it
    assert isinstance(user, ScriptedUser) and user.latency == 0.2
    start = time.perf_counter()
    assert asyncio.run(user.respond(VIEW)) == asyncio.run(ScriptedUser().respond(VIEW))
    assert time.perf_counter() - start >= 0.2


def test_concurrent_replies_wait_together_without_blocking_the_loop() -> None:
    user = ScriptedUser(latency=0.3)

    async def main() -> tuple[float, int]:
        ticks = 0

        async def ticker() -> None:  # runs only if the waits leave the loop free
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        start = time.perf_counter()
        replies = await asyncio.gather(*(user.respond(VIEW) for _ in range(20)))
        elapsed = time.perf_counter() - start
        tick.cancel()
        assert replies == [CONTEXT["request"]] * 20
        return elapsed, ticks

    elapsed, ticks = asyncio.run(main())
    assert 0.3 <= elapsed < 2.0  # twenty replies in one wait, not 20 x 0.3 s
    assert ticks >= 5


@pytest.mark.parametrize("bad", [-0.1, math.nan])
def test_a_negative_or_nan_latency_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="latency"):
        ScriptedUser(latency=bad)


def test_smoke_tools_config_sets_the_latency_and_plans() -> None:
    config = load_run_config(ROOT / "configs" / "smoke_tools.yaml")
    validate(config)
    (game,) = config.games
    assert game.id == "retail-v0" and config.model == "tiny"
    user = game.simulators["user"]
    assert user.id == "scripted-user-v0" and user.kwargs["latency"] > 0
    assert user.kwargs["latency"] < user.timeout
    assert simulators.make(user.id, **user.kwargs).latency == user.kwargs["latency"]
    assert "user=simulator:scripted-user-v0" in plan(config)
    faster = load_run_config(
        ROOT / "configs" / "smoke_tools.yaml", ["games.0.simulators.user.kwargs.latency=0.05"]
    )
    assert faster.games[0].simulators["user"].kwargs["latency"] == 0.05


def test_retail_episodes_wait_on_the_user_concurrently() -> None:
    """Eight retail-v0 episodes (the reference agent bot against a scripted user that takes
    0.1 s a reply) played at once take about one episode's waits, not eight episodes'."""
    import games
    import games.bots
    from arena.play.episode import play_episode
    from arena.play.seats import BotSeat, SimulatorSeat

    latency = 0.1

    async def one(seed: int) -> tuple[int, bool]:
        seats = {
            "user": SimulatorSeat(ScriptedUser(latency=latency), "scripted-user-v0"),
            "agent": BotSeat(games.bots.make("retail-agent-v0"), "retail-agent-v0"),
        }
        record = await play_episode(
            games.make("retail-v0"), "retail-v0", seats, seed=seed, episode_id=f"e{seed}"
        )
        user_turns = sum(t.seat == "user" for t in record.turns)
        return user_turns, record.final_rewards["agent"] == 1.0

    async def main() -> tuple[list[tuple[int, bool]], float]:
        start = time.perf_counter()
        results = await asyncio.gather(*(one(seed) for seed in range(8)))
        return results, time.perf_counter() - start

    results, elapsed = asyncio.run(main())
    waits = [n * latency for n, _ in results]
    assert all(solved for _, solved in results)  # the latency changes timing, not the play
    assert elapsed >= max(waits)
    assert elapsed < 0.5 * sum(waits)


@pytest.mark.e2e
def test_smoke_tools_trains_waiting_on_the_user(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    latency = 0.3
    result = subprocess.run(
        [sys.executable, "-m", "arena", "train", "configs/smoke_tools.yaml", "steps=2"]
        + [f"run_dir={run_dir}", f"games.0.simulators.user.kwargs.latency={latency}"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["episodes"] == 16 and row["episodes_failed"] == 0
        # 16 episodes on 2 actors x 4 at once: two waves, each waiting for the user's opening
        assert row["collect_s"] >= 2 * latency
        # sync: every trained turn comes from the version being trained
        for key in ("staleness_mean", "staleness_p50", "staleness_max"):
            assert row[f"learner/{key}"] == 0.0
    transcript = json.loads((run_dir / "transcripts.jsonl").read_text().splitlines()[0])
    assert transcript["turns"][0]["role"] == "simulated_user"
