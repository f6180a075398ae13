"""Population play's draw (arena/run/population.py) and the pool actors it loads, with and
without named policies: which snapshot a collect draws, and what each pool actor is told to load
(the shared base's, and that of each trained policy with a model of its own).

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_population.py``.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.bus import BusError
from arena.run.config import load_run_config
from arena.run.plan import plan
from arena.run.population import Population, base_loads, draw
from arena.run.processes import actor_commands, write_configs
from arena.run.roster import missing
from arena.run.run_dir import resolve_for_run
from arena.run.weight_sync import WeightSync
from tests.cli import ROOT
from tests.served import served_by

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
        path = "tiny" if label == "initial" else str(checkpoints / label / "model")
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
    write_configs(config, tmp_path)
    commands = {c.name: c.argv for c in actor_commands(config, tmp_path)}
    pool = served_by(commands["inference-pool"])
    assert pool.adapters == {
        "first": str(tmp_path.resolve() / "adapters" / "first"),
        "second": str(tmp_path.resolve() / "adapters" / "second"),
    }
    assert pool.name == "pool"


def test_the_plan_says_when_pruned_checkpoints_shrink_the_pool(tmp_path: Path) -> None:
    # Only checkpoints on disk can be drawn: keep 3 (the learner's default) under pool_size 4
    # leaves the initial model and 3 checkpoints, 0.5 / 4 = 0.125 each with latest_prob 0.5,
    # not the 0.1 that pool_size 4 would give.
    three = plan(run_with_checkpoints(tmp_path / "a", "opponents.pool_size=4"), tmp_path / "a")
    assert (
        "(latest_prob=0.5, else uniformly the initial model or one of the last 3 checkpoints on "
        "disk (pool_size 4, learner.checkpoint.keep 3))" in three
    )
    kept = run_with_checkpoints(tmp_path / "b", "learner.checkpoint.keep=4")
    assert "one of the last 4 checkpoints)" in plan(kept, tmp_path / "b")


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

    def expect(self, actor: str) -> None:
        assert actor == "inference-pool"

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


# -- a trained policy with a model of its own: a pool actor of its own --------------------------
TWO = str(ROOT / "configs" / "two_models.yaml")


def own_base_run(tmp_path: Path, *overrides: str):
    """two_models.yaml in population mode, the run's checkpoints at steps 1-3 and the
    responder's (trained, a model of its own) at steps 1 and 3 only; the judge is frozen."""
    config = load_run_config(TWO, ["model=tiny", "opponents.mode=population", *overrides])
    config = resolve_for_run(config, tmp_path)
    for step in (1, 2, 3):
        (tmp_path / "checkpoints" / f"step-{step:08d}" / "model").mkdir(parents=True)
    for step in (1, 3):
        found = tmp_path / "checkpoints" / "policies" / "responder" / f"step-{step:08d}"
        (found / "model").mkdir(parents=True)
        (found / "state.json").write_text("{}")
    return config


def test_an_own_model_plays_its_own_checkpoint_of_the_drawn_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_KEYS", raising=False)  # the hints would pass them on
    monkeypatch.delenv("ARENA_INSECURE", raising=False)
    config = own_base_run(tmp_path, "opponents.latest_prob=0")
    own = tmp_path.resolve() / "checkpoints" / "policies" / "responder"
    # step 2 has no checkpoint of the responder's: it plays its newest before, step 1's
    played = {
        "initial": ("pool-responder@initial", "tiny", 0),
        "step-00000001": ("pool-responder@step-00000001", str(own / "step-00000001/model"), 1),
        "step-00000002": ("pool-responder@step-00000001", str(own / "step-00000001/model"), 1),
        "step-00000003": ("pool-responder@step-00000003", str(own / "step-00000003/model"), 3),
    }
    for label, (named, path, version) in played.items():
        load = {"command": "load", "path": path, "version": version}
        assert base_loads(config, tmp_path, label) == {"responder": (named, load)}
    # the pool actor of its own starts on its model, with no adapter; the frozen judge has none
    write_configs(config, tmp_path)
    commands = {c.name: c.argv for c in actor_commands(config, tmp_path)}
    assert [n for n in commands if n.startswith("inference-pool")] == [
        "inference-pool",
        "inference-pool-responder",
    ]
    argv = commands["inference-pool-responder"]
    assert argv[argv.index("--actor-name") + 1] == "inference-pool-responder"
    pool = served_by(argv)
    assert (pool.name, pool.model, pool.adapters) == ("pool-responder", "tiny", {})
    # --dry-run names both pool actors; the roster waits for both
    text = plan(config, tmp_path)
    assert "inference-pool serves policy:pool: one draw per collect" in text
    assert "inference-pool-responder serves policy:pool-responder: responder's own" in text
    lacking = missing(config, [], tmp_path, "ipc:///x")
    assert (
        "inference-pool-responder serving policy:pool-responder (past snapshots of responder's "
        f"own model): arena inference --connect ipc:///x --config {tmp_path}/config.yaml "
        "--actor-name inference-pool-responder"
    ) in lacking
    # outside population mode: neither
    config = load_run_config(TWO, ["model=tiny"])
    assert not any("pool" in c.name for c in actor_commands(config, tmp_path))


class PoolActors:
    """Both pool actors on the coordinator's bus: a status service each, loads, acks."""

    def __init__(self) -> None:
        self.serving = {"inference-pool": 0, "inference-pool-responder": 0}
        self.loads: list[tuple[str, str, int]] = []

    async def request(self, *, service: str, dst: str, timeout: float) -> SimpleNamespace:
        assert service == f"policy:{dst.removeprefix('inference-')}:status"
        return SimpleNamespace(body={"version": self.serving[dst]})

    def send(self, mtype: str, body: dict, dst: str) -> None:
        assert mtype == "control" and body["command"] == "load"
        self.serving[dst] = body["version"]
        self.loads.append((dst, Path(body["path"]).parent.name, body["version"]))

    def expect(self, actor: str) -> None:
        assert actor in self.serving

    async def wait_applied(self, actor: str, version: int, exact: bool) -> None:
        assert exact and self.serving[actor] == version


def test_choose_loads_each_pool_actor_that_serves_another_snapshot(tmp_path: Path) -> None:
    config = own_base_run(tmp_path, "opponents.latest_prob=0")
    pools = PoolActors()
    population = Population(config, tmp_path, pools, pools)  # type: ignore[arg-type]
    seeds = {draw(config, tmp_path, s)[0]: s for s in range(60)}
    choose = lambda label: asyncio.run(population.choose(seeds[label], 7, {"responder": 4}))  # noqa: E731
    assert choose("step-00000002") == {
        "policy": "pool",
        "label": "pool@step-00000002",
        "own": {"responder": {"policy": "pool-responder", "label": "pool-responder@step-00000001"}},
    }
    assert pools.loads == [
        ("inference-pool", "step-00000002", 2),
        ("inference-pool-responder", "step-00000001", 1),
    ]
    # step 1: the responder's pool actor serves its step 1 already; only the shared one loads
    assert choose("step-00000001")["own"]["responder"]["label"] == "pool-responder@step-00000001"
    assert pools.loads[2:] == [("inference-pool", "step-00000001", 1)]
    choose("initial")
    assert [(actor, v) for actor, _, v in pools.loads[3:]] == [
        ("inference-pool", 0),
        ("inference-pool-responder", 0),
    ]
    # the current policy drawn: each plays its current weights, labelled with its version
    latest = own_base_run(tmp_path / "latest", "opponents.latest_prob=1")
    population = Population(latest, tmp_path / "latest", pools, pools)  # type: ignore[arg-type]
    assert asyncio.run(population.choose(0, 7, {"responder": 4})) == {
        "policy": "main",
        "label": "main@7",
        "own": {"responder": {"policy": "responder", "label": "responder@4"}},
    }


class AckingPoolActors(PoolActors):
    """Pool actors whose acknowledgement reaches the real WeightSync the moment a load is
    sent, before the coordinator asks the next pool actor what it serves."""

    def __init__(self, sync: WeightSync) -> None:
        super().__init__()
        self.sync = sync

    def send(self, mtype: str, body: dict, dst: str) -> None:
        super().send(mtype, body, dst)
        ack = {"actor": dst, "applied": True, "version": body["version"]}
        self.sync._on_ack(SimpleNamespace(topic=f"weights_ack.{dst}", body=ack))  # type: ignore[arg-type]


def test_an_acknowledgement_that_comes_before_its_wait_is_kept(tmp_path: Path) -> None:
    # Both pool actors are loaded before either is waited for; the shared pool's ack arrives
    # while the coordinator asks the second actor its status. A wait that forgot earlier acks
    # when it began dropped that one and waited out wait.weights_timeout (a 600 s hang in CI).
    config = own_base_run(tmp_path, "opponents.latest_prob=0", "wait.weights_timeout=2")
    sync = WeightSync("main", lambda event: None, timeout=config.wait.weights_timeout)
    pools = AckingPoolActors(sync)
    population = Population(config, tmp_path, pools, sync)  # type: ignore[arg-type]
    seed = next(s for s in range(60) if draw(config, tmp_path, s)[0] == "step-00000002")
    chosen = asyncio.run(asyncio.wait_for(population.choose(seed, 7, {"responder": 4}), 10))
    assert chosen is not None and chosen["label"] == "pool@step-00000002"
    assert [dst for dst, _, _ in pools.loads] == ["inference-pool", "inference-pool-responder"]
