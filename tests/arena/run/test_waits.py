"""The run's waits follow its config: policy requests ``inference.timeout``, weights
``wait.weights_timeout`` (arena/core/limits.py names the rest).

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_waits.py``.

No processes: the rollout actor and the evaluation's seats are built from a config, and the
weight sync waits on a stand-in actor that never serves the awaited version.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from arena.commands.rollout import rollout_actor
from arena.policies.chat import ChatFormat
from arena.policies.remote import RemotePolicy
from arena.run.config import RunConfig, load_run_config
from arena.run.evaluation import policy_seats
from arena.run.weight_sync import WeightSync, WeightSyncTimeout


def small_timeout() -> RunConfig:
    return load_run_config(None, ["model=tiny", "inference.timeout=7.5"])


def test_a_run_config_bounds_policy_requests_by_inference_timeout() -> None:
    assert RunConfig().inference.timeout == 600.0  # a run's requests wait behind whole batches
    assert small_timeout().inference.timeout == 7.5


def test_the_rollout_actors_policy_requests_follow_inference_timeout(tiny_tokenizer) -> None:
    config = small_timeout()
    rollout = rollout_actor(config, "ipc:///nowhere", 3)
    assert rollout.policy_timeout == 7.5
    factory = rollout.seat_factory(SimpleNamespace(), ChatFormat(tiny_tokenizer))
    assert isinstance(factory.policy, RemotePolicy) and factory.policy.timeout == 7.5
    assert factory.remote("pool").timeout == 7.5  # population opponents too


def test_the_evaluations_policy_requests_follow_inference_timeout(tiny_tokenizer) -> None:
    factory = policy_seats(SimpleNamespace(), small_timeout(), ChatFormat(tiny_tokenizer))
    assert isinstance(factory.policy, RemotePolicy) and factory.policy.timeout == 7.5


class BehindActor:
    """A bus actor whose one inference actor (:attr:`listed`) serves version 1, forever."""

    broker_sessions = 1
    listed = {"name": "inference-0", "services": ["policy:main:status"], "kind": "inference"}

    async def request(self, body: Any = None, **kwargs: Any) -> Any:
        return SimpleNamespace(body={"version": 1})


def test_a_weight_wait_past_weights_timeout_is_abandoned_by_name(monkeypatch) -> None:
    import arena.run.weight_sync as weight_sync

    async def listing(actor: Any, **_: Any) -> list[dict[str, Any]]:
        return [BehindActor.listed]

    monkeypatch.setattr(weight_sync, "listing", listing)
    config = load_run_config(None, ["model=tiny", "wait.weights_timeout=0.3"])
    events: list[str] = []
    sync = WeightSync("main", events.append, timeout=config.wait.weights_timeout)
    sync.actor = BehindActor()  # type: ignore[assignment]

    async def scenario() -> None:
        with pytest.raises(WeightSyncTimeout, match="inference-0 did not apply weights v2"):
            await asyncio.wait_for(sync.wait_serving(2), 10)
        with pytest.raises(WeightSyncTimeout, match="inference-pool did not load weights v2"):
            await asyncio.wait_for(sync.wait_applied("inference-pool", 2, exact=True), 10)

    asyncio.run(scenario())
    assert len(events) == 2 and all("wait.weights_timeout" in e for e in events)


def test_an_abandoned_wait_for_weights_ends_the_run_in_one_line(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # events.log named it, but the console got a WeightSyncTimeout traceback (exit 1).
    import arena.run.train as run_train

    async def abandoned(self: Any) -> int:
        raise WeightSyncTimeout("inference-pool did not load weights v1 in 30s")

    monkeypatch.setattr(run_train.RunCoordinator, "run", abandoned)
    config = load_run_config(None, ["model=tiny", f"run_dir={tmp_path / 'run'}"])
    assert run_train.train(config) == 1
    run = tmp_path / "run"
    assert capsys.readouterr().err == (
        "arena train: weight sync abandoned: inference-pool did not load weights v1 in 30s "
        f"(wait.weights_timeout); read {run / 'events.log'} and {run / 'logs'}; continue "
        f"with resume={run}\n"
    )
