"""Population play's draw (arena/run/population.py) and the pool actor it loads, with and
without named policies: which snapshot a collect draws, and what the pool actor is told to load.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_population.py``.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.bus import BusError
from arena.models import model_dir
from arena.run.config import load_run_config
from arena.run.population import Population, draw
from arena.run.processes import actor_commands
from arena.run.run_dir import resolve_for_run
from tests.cli import ROOT

SMOKE = str(ROOT / "configs" / "smoke.yaml")
NAMED = [
    "games=[{id: kuhn-poker-v0}]",
    "policies={first: {}, second: {}}",
    "seat_policies={player_0: first, player_1: second}",
]


def run_with_checkpoints(tmp_path: Path, *overrides: str, steps: int = 3):
    config = load_run_config(SMOKE, ["opponents.mode=population", *overrides])
    config = resolve_for_run(config, tmp_path)
    for step in range(1, steps + 1):
        (tmp_path / "checkpoints" / f"step-{step:08d}" / "model").mkdir(parents=True)
    return config


def test_a_draw_is_the_latest_policy_or_one_of_the_pool(tmp_path: Path) -> None:
    # pool_size 2 of 3 checkpoints: step 1 has left the pool; latest_prob 0.5 as the seed says
    config = run_with_checkpoints(tmp_path, "opponents.pool_size=2")
    checkpoints = tmp_path / "checkpoints"
    for seed in range(30):
        rng = random.Random(seed)
        latest = rng.random() < 0.5
        expected = rng.choice(["initial", "step-00000002", "step-00000003"])
        label, load = draw(config, tmp_path, seed)
        if latest:
            assert (label, load) == ("latest", None)
            continue
        assert label == expected
        path = str(model_dir("tiny")) if label == "initial" else str(checkpoints / label / "model")
        version = 0 if label == "initial" else int(label[-1])
        assert load == {"command": "load", "path": path, "version": version}


def test_named_adapters_load_each_policys_adapter_of_the_drawn_step(tmp_path: Path) -> None:
    config = run_with_checkpoints(tmp_path, *NAMED, "opponents.latest_prob=0")
    labels = set()
    for seed in range(12):
        label, load = draw(config, tmp_path, seed)
        labels.add(label)
        where = (
            tmp_path.resolve() / "adapters"
            if label == "initial"
            else tmp_path / "checkpoints" / label / "adapters"
        )
        version = 0 if label == "initial" else int(label[-1])
        assert load == {
            "command": "load",
            "adapters": {"first": str(where / "first"), "second": str(where / "second")},
            "version": version,
        }
    assert labels == {"initial", "step-00000001", "step-00000002", "step-00000003"}
    # the pool actor starts on the run's fresh adapters, each under its policy's name
    commands = {c.name: c.argv for c in actor_commands(config, tmp_path)}
    pool = commands["inference-pool"]
    flags = sorted(a for a in pool if a.startswith("--adapter="))
    assert flags == [
        f"--adapter=first={tmp_path.resolve() / 'adapters' / 'first'}",
        f"--adapter=second={tmp_path.resolve() / 'adapters' / 'second'}",
    ]
    assert pool[pool.index("--name") + 1] == "pool"


class PoolActor:
    """The pool actor as the coordinator's bus sees it: a status service, a restart (it serves
    the initial weights, version 0, again) and a spell away from the bus."""

    def __init__(self) -> None:
        self.serving = 0
        self.away = 0  # status requests still to fail
        self.loads: list[int] = []

    async def request(self, *, service: str, dst: str, timeout: float) -> SimpleNamespace:
        assert (service, dst) == ("policy:pool:status", "inference-pool")
        if self.away:
            self.away -= 1
            raise BusError("actor_dead", "inference-pool is restarting")
        return SimpleNamespace(body={"version": self.serving})

    def send(self, mtype: str, body: dict, dst: str) -> None:
        assert (mtype, dst) == ("control", "inference-pool")
        self.serving = body["version"]
        self.loads.append(body["version"])

    async def wait_applied(self, actor: str, version: int, exact: bool) -> None:
        assert (actor, exact) == ("inference-pool", True) and self.serving == version


def test_a_restarted_pool_actor_is_loaded_again_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = run_with_checkpoints(tmp_path, "opponents.latest_prob=0", "opponents.pool_size=1")
    pool = PoolActor()
    population = Population(config, tmp_path, pool, pool)  # type: ignore[arg-type]
    monkeypatch.setattr("arena.run.population.STATUS_RETRY", 0.0)
    seed = next(s for s in range(50) if draw(config, tmp_path, s)[0] == "step-00000003")
    choose = lambda: asyncio.run(population.choose(seed, 7))  # noqa: E731
    assert choose() == {"policy": "pool", "label": "pool@step-00000003"}
    assert choose() == {"policy": "pool", "label": "pool@step-00000003"}
    assert pool.loads == [3]  # served already: loaded once
    pool.serving, pool.away = 0, 2  # restarted: away for two asks, then the initial weights
    assert choose() == {"policy": "pool", "label": "pool@step-00000003"}
    assert pool.loads == [3, 3] and pool.away == 0
