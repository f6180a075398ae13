"""``launcher=ray``: the config, what each process asks Ray for, the process host's stop, and
(slow) real runs on a local Ray cluster that the tests start and stop.

The slow tests start one Ray instance for the module (``ray.init(address="local")``, 8 logical
CPUs, in a short temp directory) and shut it down after: ``arena train`` connects to it as a real
cluster, by address, and the in-process launcher tests reuse this process's connection.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_ray_launcher.py`` (``-m 'not slow'``
for the fast ones only).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from arena.core.errors import ConfigError
from arena.run.addresses import bus_address, own_broker
from arena.run.config import RayConfig, RayResources, RayResourcesConfig, load_run_config
from arena.run.launcher import ChildDied
from arena.run.plan import plan
from arena.run.processes import actor_commands
from arena.run.ray_launcher import (
    ProcessHost,
    RayLauncher,
    actor_options,
    beyond_cluster,
    check_reachable,
    forwarded_env,
    placed_kind,
    threads_for,
)
from arena.run.run_dir import resolve_for_run

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "configs" / "smoke.yaml"


def ray_config(*overrides: str):
    return load_run_config(SMOKE, ["launcher=ray", *overrides])


# -- config and mapping (fast, no Ray) -----------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["launcher=slurm"], "launcher"),
        (["launcher=ray", "ray.resources.rollout.num_cpus=-1"], "ray.resources.rollout.num_cpus"),
        (["launcher=ray", "ray.resources.learner.num_gpus=-0.5"], "ray.resources.learner.num_gpus"),
        (["launcher=ray", "ray.broker_port=70000"], "ray.broker_port"),
        (["launcher=ray", "ray.placement_timeout=0"], "ray.placement_timeout"),
        (["launcher=ray", "inference.device=cuda"], "ray.resources.inference.num_gpus"),
        (["launcher=ray", "learner.device=cuda:1"], "ray.resources.learner.num_gpus"),
        (["launcher=ray", "ray.resources.rolout.num_cpus=1"], "ray.resources.rollout"),
    ],
)
def test_bad_ray_settings_are_refused_naming_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_run_config(SMOKE, overrides)


def test_gpus_where_devices_need_them_are_accepted() -> None:
    config = ray_config(
        "inference.device=cuda",
        "learner.device=cuda",
        "ray.resources.inference.num_gpus=0.5",
        "ray.resources.learner.num_gpus=1",
    )
    assert config.ray.resources.inference == RayResources(num_cpus=1.0, num_gpus=0.5)
    # the local launcher hides no GPU: no request needed
    assert load_run_config(SMOKE, ["inference.device=cuda"]).launcher == "local"


def test_the_own_broker_listens_on_tcp_under_ray(tmp_path: Path) -> None:
    local = load_run_config(SMOKE)
    assert bus_address(local, tmp_path).startswith("ipc://")
    config = resolve_for_run(ray_config(), tmp_path)
    port = config.ray.broker_port
    assert 0 < port < 65536 and own_broker(config, tmp_path)
    assert bus_address(config, tmp_path) == f"tcp://127.0.0.1:{port}"
    # a resumed run (its config.yaml holds the port) binds the same one
    assert resolve_for_run(config, tmp_path).ray.broker_port == port
    host = resolve_for_run(ray_config("ray.broker_host=10.0.0.7", "ray.broker_port=6000"), tmp_path)
    assert bus_address(host, tmp_path) == "tcp://10.0.0.7:6000"
    # an external broker: no port picked, nothing started
    external = resolve_for_run(ray_config("bus.address=tcp://10.0.0.1:5555"), tmp_path)
    assert external.ray.broker_port == 0 and not own_broker(external, tmp_path)
    assert bus_address(external, tmp_path) == "tcp://10.0.0.1:5555"


def test_every_process_runs_the_local_command_line_with_its_kinds_resources(
    tmp_path: Path,
) -> None:
    config = resolve_for_run(
        ray_config(
            "opponents.mode=population",
            "ray.resources.inference.num_gpus=1",
            "ray.resources.learner.num_cpus=4",
            "ray.resources.rollout.num_cpus=0.5",
        ),
        tmp_path,
    )
    address = bus_address(config, tmp_path)
    commands = actor_commands(config, tmp_path)
    names = [c.name for c in commands]
    assert names == ["broker", "inference-0", "inference-pool", "learner", "rollout-0", "rollout-1"]
    assert [placed_kind(n) for n in names] == [
        "broker",
        "inference",
        "inference",
        "learner",
        "rollout",
        "rollout",
    ]
    for command in commands:  # one bus address, tcp, for every process
        assert address in command.argv and "ipc://" not in " ".join(command.argv)
    # the same argv as the local launcher's
    local = actor_commands(load_run_config(SMOKE, ["opponents.mode=population"]), tmp_path)
    assert [c.argv[:2] for c in local] == [c.argv[:2] for c in commands]
    resources = config.ray.resources
    assert actor_options(resources.inference) == {
        "num_cpus": 1.0,
        "num_gpus": 1.0,
        "max_restarts": 0,
    }
    assert actor_options(resources.rollout)["num_cpus"] == 0.5
    assert threads_for(resources.learner, 0) == "4"
    assert threads_for(resources.rollout, 0) == "1"  # at least one thread
    assert threads_for(resources.rollout, 3) == "3"  # cpu_threads wins
    with pytest.raises(ValueError, match="train"):
        placed_kind("train")


def test_processes_beyond_the_clusters_resources_are_said_at_once() -> None:
    """inference.actors=2 and one rollout actor on a local 2-CPU instance ask for 5 CPUs at 1 a
    process: the run waited the whole ray.placement_timeout (300 s) before saying why."""
    one, half = RayResources(num_cpus=1), RayResources(num_cpus=0.5)
    names = ["broker", "inference-0", "inference-1", "learner", "rollout-0"]
    message = beyond_cluster(dict.fromkeys(names, one), {"CPU": 2.0}, 300)
    assert message is not None and message.startswith("launcher=ray: ")
    assert "ask for 5 CPU in all (broker 1, inference 2, learner 1, rollout 1)" in message
    assert "the Ray cluster has 2" in message and "ray.placement_timeout=300s" in message
    assert "ray.resources.<kind>.num_cpus" in message
    assert beyond_cluster(dict.fromkeys(names[:4], half), {"CPU": 2.0}, 300) is None  # 2 of 2
    gpu = {"learner": RayResources(num_cpus=0.5, num_gpus=1)}
    assert "1 GPU in all (learner 1)" in beyond_cluster(gpu, {"CPU": 8.0}, 60)
    assert beyond_cluster(gpu, {"CPU": 8.0, "GPU": 1.0}, 60) is None


def test_only_run_wide_variables_are_forwarded() -> None:
    env = forwarded_env(
        {
            "ARENA_KEYS": "/keys",
            "ARENA_ROUTING": "direct",
            "ARENA_PARENT_PID": "1",
            "ARENA_ADVERTISE_HOST": "head",
            "CUDA_VISIBLE_DEVICES": "0",
            "HOME": "/root",
        }
    )
    assert env == {"ARENA_KEYS": "/keys", "ARENA_ROUTING": "direct", "PYTHONUNBUFFERED": "1"}


def test_a_loopback_bus_is_refused_on_a_cluster_of_several_nodes() -> None:
    one, two = [{"Alive": True}], [{"Alive": True}, {"Alive": True}]
    check_reachable("tcp://127.0.0.1:5555", one)
    check_reachable("tcp://10.0.0.7:5555", two)
    for address in ("tcp://127.0.0.1:5555", "ipc:///tmp/run/bus.sock"):
        with pytest.raises(ConfigError, match="ray.broker_host"):
            check_reachable(address, two)


def test_dry_run_shows_the_launcher_and_resources() -> None:
    shown = plan(ray_config("ray.address=auto", "ray.resources.inference.num_gpus=1"))
    assert "tcp://127.0.0.1:<port>" in shown
    line = next(line for line in shown.splitlines() if line.strip().startswith("launcher"))
    assert "ray (cluster auto)" in line and "inference 1 CPU 1 GPU" in line
    assert "rollout 1 CPU 0 GPU" in line
    assert "launcher     local" in plan(load_run_config(SMOKE))


def test_the_process_host_stops_its_process_group(tmp_path: Path, ipc_dir: str) -> None:
    """Without Ray: the actor class is plain Python."""

    async def scenario() -> tuple[int | None, int]:
        host = ProcessHost(
            ["broker", "--bind", f"ipc://{ipc_dir}/bus.sock"],
            {"PYTHONUNBUFFERED": "1"},
            str(tmp_path / "logs" / "broker.log"),
            str(ROOT),
        )
        run = asyncio.create_task(host.run())
        await asyncio.wait_for(host.started.wait(), 10)
        assert host.process is not None
        pid = host.process.pid
        assert os.getpgid(pid) == pid  # a group of its own
        deadline = time.monotonic() + 60
        while "listening" not in (tmp_path / "logs" / "broker.log").read_text():
            assert time.monotonic() < deadline and not run.done(), "the broker never started"
            await asyncio.sleep(0.2)
        stopped = await host.stop(timeout=10)
        assert await asyncio.wait_for(run, 5) == stopped
        return stopped, pid

    code, pid = asyncio.run(scenario())
    assert code == 0  # SIGTERM: a clean stop
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


# -- a real local Ray cluster (slow) --------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[SimpleNamespace]:
    """A local Ray instance with 8 logical CPUs (more than the cores: Ray only counts them),
    stopped after the module: the ``ray`` module (connected) and the cluster's address."""
    ray = pytest.importorskip("ray")
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay short
    context = ray.init(address="local", num_cpus=8, include_dashboard=False, _temp_dir=temp)
    try:
        yield SimpleNamespace(ray=ray, address=context.address_info["gcs_address"])
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def live_hosts(ray: Any) -> list[dict[str, Any]]:
    """The process-host actors Ray still counts as alive (every job's)."""
    from ray._private import state  # the state API needs the dashboard; the GCS does not

    return [
        a
        for a in state.actors().values()
        if a["ActorClassName"] == "ProcessHost" and a["State"] != "DEAD"
    ]


def pids_of(pattern: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if pattern in cmdline:
                found.append(int(pid))
    return found


def wait_gone(what: str, pending, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while left := pending():
        assert time.monotonic() < deadline, f"{what} outlived the run: {left}"
        time.sleep(0.5)


@pytest.mark.slow
def test_launcher_ray_trains_the_smoke_config(ray_cluster: SimpleNamespace, tmp_path: Path) -> None:
    ray = ray_cluster.ray
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "arena",
            "train",
            str(SMOKE),
            f"output_dir={tmp_path}",
            "launcher=ray",
            f"ray.address={ray_cluster.address}",
        ],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=ROOT,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "smoke").iterdir()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("learner/loss" in r for r in rows)
    config = load_run_config(run_dir / "config.yaml")
    address = f"tcp://127.0.0.1:{config.ray.broker_port}"
    assert config.launcher == "ray" and config.ray.broker_port > 0
    assert f"broker       {address}" in result.stdout and "launcher     ray" in result.stdout
    for name in ("broker", "inference-0", "learner", "rollout-0", "rollout-1"):
        assert (run_dir / "logs" / f"{name}.log").stat().st_size > 0, name
    assert "listening on " + address in (run_dir / "logs" / "broker.log").read_text()
    # every process's command line holds the bus address; the learner's and rollouts' the run's
    wait_gone("arena processes", lambda: pids_of(address) + pids_of(str(run_dir)))
    wait_gone("Ray actors", lambda: live_hosts(ray))
    print(f"launcher=ray smoke run: {elapsed:.1f}s")


def until_died(launcher: RayLauncher, timeout: float = 120.0) -> tuple[list[str], str]:
    """Call ``check`` as the coordinator does until a child's end stops the run."""
    events: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            events += launcher.check()
        except ChildDied as err:
            return events, str(err)
        time.sleep(0.2)
    raise AssertionError(f"no child died within {timeout}s; events: {events}")


@pytest.mark.slow
def test_dead_and_unplaceable_children_are_named(
    ray_cluster: SimpleNamespace, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ray = ray_cluster.ray
    resources = RayResourcesConfig(rollout=RayResources(num_cpus=0.5))
    launcher = RayLauncher(
        tmp_path / "logs", RayConfig(resources=resources), "tcp://127.0.0.1:1", cpu_threads=0
    )
    assert not launcher.owns_ray  # this process's connection: the launcher leaves it open
    try:
        # a child that crashes (exit 1: an arena broker whose socket directory is missing):
        # restarted once (a new actor), then the run stops
        crash = ["broker", "--bind", f"ipc://{tmp_path}/missing/bus.sock"]
        launcher.start("rollout-0", crash, restartable=True, max_restarts=1)
        events, error = until_died(launcher)
        assert len(events) == 1 and "rollout-0" in events[0] and "restarting (1/1)" in events[0]
        assert error.startswith("rollout-0 (pid ") and "exited with code 1" in error
        assert "ZMQError" in error  # the end of its log
    finally:
        launcher.stop_all()
    assert not live_hosts(ray)

    refusing = RayLauncher(
        tmp_path / "logs1", RayConfig(resources=resources), "tcp://127.0.0.1:1", cpu_threads=0
    )
    try:
        # a child that refuses its command line (exit 2) would fail the same way again: the run
        # stops at once, without a restart
        refusing.start("rollout-0", ["rollout", "--no-such-flag"], restartable=True, max_restarts=1)
        events, error = until_died(refusing)
        assert events == [] and error.startswith("rollout-0 (pid ")
        assert "exited with code 2" in error and "not restarted" in error
        assert "arena rollout: the following arguments are required" in error  # its log's end
    finally:
        refusing.stop_all()
    assert not live_hosts(ray)

    unplaceable = RayLauncher(
        tmp_path / "logs2",
        RayConfig(
            placement_timeout=2.0,
            resources=RayResourcesConfig(learner=RayResources(num_cpus=1, num_gpus=1)),
        ),
        "tcp://127.0.0.1:1",
    )
    # the run says what it starts before the first starts: the warning weighs all of it (it
    # once counted only the processes started so far, here the learner's 1 CPU of 8)
    unplaceable.expect(["learner", *(f"rollout-{i}" for i in range(9))])
    try:
        with caplog.at_level("WARNING", logger="arena.run.ray_launcher"):
            unplaceable.start("learner", ["learner", "--help"])
        assert "ask for 10 CPU in all (learner 1, rollout 9) and the Ray cluster has 8" in (
            caplog.text
        )
        _, error = until_died(unplaceable, timeout=30)
        assert error.startswith("learner was not placed by Ray within ray.placement_timeout=2s")
        assert "1 CPU, 1 GPU" in error and "ray.resources.learner" in error and "0/0 GPU" in error
    finally:
        unplaceable.stop_all(timeout=2)
    assert not live_hosts(ray)


@pytest.mark.slow
def test_a_lost_actor_takes_its_process_along_and_is_reported(
    ray_cluster: SimpleNamespace, tmp_path: Path, ipc_dir: str
) -> None:
    ray = ray_cluster.ray
    launcher = RayLauncher(tmp_path / "logs", RayConfig(), "tcp://127.0.0.1:1")
    try:
        child = launcher.start("broker", ["broker", "--bind", f"ipc://{ipc_dir}/bus.sock"])
        deadline = time.monotonic() + 60
        while child.pid is None:
            assert time.monotonic() < deadline and not launcher.check(), "never started"
            time.sleep(0.2)
        (worker,) = [a["Pid"] for a in live_hosts(ray)]
        assert Path(f"/proc/{child.pid}/status").read_text().count(f"PPid:\t{worker}\n") == 1
        os.kill(worker, signal.SIGKILL)  # the actor's process dies (a node would take both)
        _, error = until_died(launcher)
        assert error.startswith(f"broker (pid {child.pid}) was lost on ")
        assert "its Ray actor died" in error
        wait_gone("the broker", lambda: pids_of(f"ipc://{ipc_dir}/bus.sock"))  # PDEATHSIG
    finally:
        launcher.stop_all()
    assert not live_hosts(ray)
