"""The multi-host recipe of ``docs/deploy.md`` across Linux network namespaces: every "host" its
own network stack, joined by veth pairs to a bridge, with CURVE keys on.

The hosts are namespaces ``10.77.0.1`` (the broker and ``arena train``), ``.2`` (the inference
actor), ``.3`` (the learner), ``.4`` (the rollout actor) and ``.5`` (an outsider). Each has an
``eth0`` (one end of a veth pair) whose other end is a port of the bridge ``br0`` in a sixth
namespace, the switch. Nothing is added to the root namespace, so the host's firewall and
``br_netfilter`` settings play no part, and deleting the namespaces removes everything.

Every actor runs with ``ARENA_ROUTING=direct``: requests wait for a peer-to-peer connection
instead of falling back to the broker, so the run only finishes if the direct data plane works
between namespaces.

Needs root and iproute2 (``apt-get install -y iproute2``); skipped otherwise. Run with
``.venv/bin/python -m pytest -q tests/arena/run/test_netns.py`` (marked ``slow``: a minute or
two).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.arena.run.test_external_broker import ROOT, deploy_recipe, wait_until

SUBNET = "10.77.0"
HOSTS = ("broker", "inference", "learner", "rollout", "outsider")
"""The namespaces, in address order: ``broker`` is 10.77.0.1, ``outsider`` 10.77.0.5."""
PORT = 5555  # the recipe's own: ports are per namespace, so no other test can hold it
IP_TIMEOUT = 20  # seconds for one `ip` command
RUN_TIMEOUT = 400  # seconds for the two steps, once every actor is started


def ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT, check=False
    )


def must(*args: str) -> None:
    done = ip(*args)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")


@dataclass
class Lan:
    """The namespaces of one test, named with a random token so parallel runs do not clash."""

    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    made: list[str] = field(default_factory=list)
    """The namespaces created so far (the switch first)."""

    @property
    def switch(self) -> str:
        return f"arena-{self.token}-switch"

    def netns(self, host: str) -> str:
        return f"arena-{self.token}-{host}"

    def address(self, host: str) -> str:
        return f"{SUBNET}.{HOSTS.index(host) + 1}"

    def exec(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.netns(host)]

    def build(self) -> None:
        """The switch, then each host: ``eth0`` with its address, ``lo`` up."""
        must("-n", self.switch, "link", "add", "br0", "type", "bridge")
        must("-n", self.switch, "link", "set", "lo", "up")
        must("-n", self.switch, "link", "set", "br0", "up")
        for i, host in enumerate(HOSTS):
            name = self.netns(host)
            must("netns", "add", name)
            self.made.append(name)
            port = f"port{i}"
            veth = ("type", "veth", "peer", "name", "eth0", "netns", name)
            must("-n", self.switch, "link", "add", port, *veth)
            must("-n", self.switch, "link", "set", port, "master", "br0")
            must("-n", self.switch, "link", "set", port, "up")
            must("-n", name, "link", "set", "lo", "up")
            must("-n", name, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            must("-n", name, "link", "set", "eth0", "up")

    def teardown(self) -> list[str]:
        """Kill what still runs in the namespaces, delete the veth pairs, the bridge and the
        namespaces; returns what could not be removed."""
        for name in self.made:
            pids = ip("netns", "pids", name).stdout.split()
            for pid in pids:  # only processes this test started can be in its namespaces
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        for i in range(len(HOSTS)):
            ip("-n", self.switch, "link", "del", f"port{i}")  # takes its peer eth0 along
        ip("-n", self.switch, "link", "del", "br0")
        left = []
        for name in reversed(self.made):
            ip("netns", "del", name)
        listed = ip("netns", "list").stdout
        for name in self.made:
            if any(line.split()[:1] == [name] for line in listed.splitlines()):
                left.append(name)
        return left


@pytest.fixture
def lan() -> Iterator[Lan]:
    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed (`apt-get install -y iproute2`): no `ip` command")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (`ip netns add` as uid 0)")
    net = Lan()
    made = ip("netns", "add", net.switch)
    if made.returncode != 0:
        pytest.skip(f"network namespaces are not permitted here: {made.stderr.strip()}")
    net.made.append(net.switch)
    try:
        try:
            net.build()
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            pytest.skip(f"cannot build a veth/bridge network between namespaces: {err}")
        yield net
    finally:
        left = net.teardown()
        assert not left, f"network namespaces left behind: {left}"


def localize(line: str) -> list[str]:
    """A recipe line for the namespaces: host-a is the broker namespace's address, configs/ the
    repository's, and ``arena`` this interpreter's. Port 5555 stays."""
    argv = shlex.split(line.replace("configs/", f"{ROOT}/configs/"))
    assert argv[0] == "arena", line
    return [sys.executable, "-m", "arena", *argv[1:]]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # children that outlived their leader
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.mark.slow
def test_the_recipe_trains_across_network_namespaces_with_keys(lan: Lan, tmp_path: Path) -> None:
    recipe = deploy_recipe()
    address = f"tcp://{lan.address('broker')}:{PORT}"
    recipe = [line.replace("host-a", lan.address("broker")) for line in recipe]
    by_command = {shlex.split(line)[1]: line for line in recipe}
    assert list(by_command) == [
        "keys",
        "broker",
        "ping",
        "train",
        "inference",
        "learner",
        "rollout",
    ]
    where = {  # the namespace each recipe line runs in
        "keys": "broker",
        "broker": "broker",
        "ping": "rollout",  # "any host"
        "train": "broker",
        "inference": "inference",
        "learner": "learner",
        "rollout": "rollout",
    }
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ARENA_KEYS", "ARENA_INSECURE", "ARENA_KEY_NAME", "ARENA_ADVERTISE_HOST")
    }
    env.update(ARENA_ROUTING="direct", PYTHONUNBUFFERED="1")
    run_dir = tmp_path / "runs" / "multihost"
    logs: dict[str, Path] = {}
    background: dict[str, subprocess.Popen] = {}

    def start(name: str, host: str, argv: list[str]) -> subprocess.Popen:
        logs[name] = tmp_path / f"{name}.out"
        with open(logs[name], "w") as out:
            background[name] = subprocess.Popen(
                lan.exec(host) + argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
                env=env,
                start_new_session=True,
            )
        return background[name]

    def run(name: str, host: str, argv: list[str], timeout: float = 120) -> int:
        """Run to completion (killed, as a process group, at ``timeout``)."""
        proc = start(name, host, argv)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            pytest.fail(f"{name} ran past {timeout} s:\n{tails()}")
        del background[name]
        return proc.returncode

    def tail(name: str) -> str:
        return logs[name].read_text(errors="replace")[-3000:] if name in logs else ""

    def tails() -> str:
        return "".join(f"\n--- {name} ({logs[name]}) ---\n{tail(name)}" for name in logs)

    def steps() -> list[int]:
        path = run_dir / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(r)["step"] for r in path.read_text().splitlines() if r.strip()]

    try:
        for command, line in by_command.items():
            argv, host = localize(line), where[command]
            if command in ("keys", "ping"):
                rc = run(command, host, argv)
                assert rc == 0, f"{line} -> {rc}:{tails()}"
            elif command == "broker":
                start("broker", host, argv)
                wait_until(lambda: "listening" in tail("broker"), 60, "the broker never listened")
            elif command == "train":
                start("train", host, argv)
                try:
                    wait_until(
                        lambda: (
                            (run_dir / "learner.yaml").exists()
                            or background["train"].poll() is not None
                        ),
                        120,
                        "no learner.yaml",
                    )
                except TimeoutError:
                    pytest.fail(f"arena train wrote no learner.yaml:{tails()}")
                assert background["train"].poll() is None, tails()
            else:
                start(command, host, argv)
        train = background["train"]
        deadline = time.monotonic() + RUN_TIMEOUT  # within pytest's 600 s, to show the logs

        # while the run is alive: the registry, seen from another namespace
        try:
            wait_until(lambda: steps() or train.poll() is not None, RUN_TIMEOUT, "no metrics")
        except TimeoutError:
            pytest.fail(f"no step finished in {RUN_TIMEOUT} s:{tails()}")
        status = subprocess.run(
            lan.exec("learner")
            + [sys.executable, "-m", "arena", "status", address, "--keys", "keys", "--json"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
        assert status.returncode == 0, status.stdout + status.stderr + tails()
        (tmp_path / "status.json").write_text(status.stdout)
        actors = {a["name"]: a for a in json.loads(status.stdout)}

        try:
            train.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"arena train did not finish in {RUN_TIMEOUT} s:{tails()}")
        assert train.returncode == 0, f"arena train -> {train.returncode}:{tails()}"
        for name, proc in background.items():  # the others serve on, as they would elsewhere
            assert name == "train" or proc.poll() is None, f"{name} died:{tails()}"

        # an outsider can reach the broker: with the keys it gets in, without them it does not
        ping = [sys.executable, "-m", "arena", "ping", address, "-n", "1"]
        assert run("outsider-keys", "outsider", [*ping, "--keys", "keys"]) == 0, tails()
        assert run("other-keys", "broker", localize("arena keys generate other")) == 0, tails()
        intruder = localize("arena keys generate intruder")
        assert run("intruder-keys", "broker", intruder) == 0, tails()
        # the intruder knows the broker's public key, but its own is not authorized
        shutil.copy(tmp_path / "keys" / "broker.key", tmp_path / "intruder" / "broker.key")
        refused = {
            "outsider-other-keys": [*ping, "--keys", "other"],
            "outsider-intruder": [*ping, "--keys", "intruder"],
            "outsider-insecure": [*ping, "--insecure"],
            "outsider-no-keys": ping,
        }
        for name, argv in refused.items():
            rc = run(name, "outsider", argv, timeout=60)
            assert rc != 0, f"{name} got in:{tails()}"
        assert "no broker" in tail("outsider-other-keys"), tails()
        assert "no broker" in tail("outsider-intruder"), tails()
        assert "pass --keys DIR" in tail("outsider-no-keys"), tails()
        assert background["broker"].poll() is None, f"the broker died:{tails()}"
        refusal = f"refused a bus connection from {lan.address('outsider')}"
        assert refusal in tail("broker"), tails()  # the intruder, turned away by ZAP
    finally:
        for proc in background.values():
            kill_group(proc)

    # the directory: every serving actor advertises its own namespace's address
    for name, host in (
        ("inference-0", "inference"),
        ("learner", "learner"),
        ("rollout-0", "rollout"),
    ):
        assert name in actors, f"{name} not registered: {sorted(actors)}"
        assert actors[name]["endpoint"].startswith(f"tcp://{lan.address(host)}:"), actors[name]
    endpoints = [a["endpoint"] for a in actors.values() if a.get("endpoint")]
    assert not [e for e in endpoints if "127.0.0.1" in e], actors
    assert any(s.startswith("policy:main") for s in actors["inference-0"]["services"])

    # the run: two steps, trained on the rollout actor's episodes
    assert steps() == [1, 2], tails()
    rows = [json.loads(r) for r in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(r["episodes"] >= 8 and "learner/loss" in r for r in rows), rows
    transcripts = [json.loads(r) for r in (run_dir / "transcripts.jsonl").read_text().splitlines()]
    assert transcripts and all(t["id"].startswith("rollout-0-") for t in transcripts)
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step-*"))[-1].endswith("2")
    assert not list((run_dir / "logs").glob("*.log")), "train started a process itself"
    out = logs["train"].read_text()
    assert address in out and "waiting up to" in out, out[-3000:]
