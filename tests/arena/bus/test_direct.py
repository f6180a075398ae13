"""The direct data plane and a broker that dies and comes back, with real processes and sockets.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_direct.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from arena.bus import BlockingActor, BusError
from tests.arena.bus.conftest import spawn, spawn_broker, stop, wait_for_service

FAST = ("--heartbeat-interval", "0.2")


def spawn_echo(address: str, name: str, service: str = "test.echo") -> subprocess.Popen:
    return spawn("-m", "arena", "echo", address, "--name", name, "--service", service, *FAST)


def spawn_slow(address: str, name: str) -> subprocess.Popen:
    """An actor whose ``test.slow`` service never answers within a test's patience."""
    code = textwrap.dedent(
        f"""
        import asyncio
        from arena.bus import Actor

        async def main():
            async def slow(msg):
                await asyncio.sleep(600)
            actor = Actor({name!r}, {address!r}, heartbeat_interval=0.2,
                          services={{"test.slow": slow}})
            await actor.start()
            print("ready", flush=True)
            await asyncio.Event().wait()

        asyncio.run(main())
        """
    )
    proc = spawn("-c", code)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def registered(address: str, timeout: float = 10.0) -> list[str]:
    with BlockingActor(f"probe-{time.monotonic_ns()}", address, routing="brokered") as probe:
        return sorted(a["name"] for a in probe.call(service="broker.actors", timeout=timeout))


def test_requests_go_peer_to_peer_and_flow_while_the_broker_is_down(address: str) -> None:
    broker = spawn_broker(address, "--heartbeat-timeout", "1.0")
    echo = spawn_echo(address, "echo-1")
    try:
        wait_for_service(address, "test.echo")
        with BlockingActor("client", address, routing="direct", heartbeat_interval=0.2) as client:
            assert client.call("first", service="test.echo") == "first"
            entry = client.actor.directory._entries["service:test.echo"]
            assert [i.name for i in entry] == ["echo-1"]
            broker.send_signal(signal.SIGKILL)
            broker.wait()
            # Nothing routes through the broker now: every answer came peer to peer.
            assert [client.call(i, service="test.echo") for i in range(50)] == list(range(50))
            time.sleep(1.5)  # past the heartbeat timeout: both actors declare the broker lost
            assert client.actor.broker_up is False
            assert client.call("still", service="test.echo", timeout=2) == "still"
            with pytest.raises(BusError) as lost:
                client.call(service="broker.actors", timeout=5)
            assert lost.value.code == "broker_lost"

            # Same address, fresh broker: the idle echo actor and the client register again
            # by themselves (the broker answers an unknown actor's heartbeat with
            # not_registered).
            broker = spawn_broker(address, "--heartbeat-timeout", "1.0")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                names = registered(address)
                if "echo-1" in names and "client" in names:
                    break
                time.sleep(0.1)
            assert {"echo-1", "client"} <= set(names)
            assert client.actor.counters["broker_lost"] == 1
            assert client.actor.counters["registered_again"] == 1
            assert client.call("back", service="test.echo") == "back"
    finally:
        stop(echo)
        stop(broker)


def test_a_pending_direct_request_to_a_killed_peer_fails_fast_even_without_broker(
    address: str,
) -> None:
    broker = spawn_broker(address, "--heartbeat-timeout", "1.0")
    slow = spawn_slow(address, "slow-1")
    try:
        wait_for_service(address, "test.slow")
        with BlockingActor("client", address, routing="direct", heartbeat_interval=0.2) as client:
            pending = client.request(service="test.slow", timeout=120)
            time.sleep(0.3)
            assert not pending.done()
            broker.send_signal(signal.SIGKILL)  # no broker left to announce the death
            broker.wait()
            start = time.monotonic()
            slow.send_signal(signal.SIGKILL)
            slow.wait()
            with pytest.raises(BusError) as failed:
                pending.result(timeout=5)
            assert failed.value.code == "actor_dead"
            assert "slow-1" in failed.value.message
            assert time.monotonic() - start < 2.0
    finally:
        stop(slow)
        stop(broker)


def test_two_clients_share_two_instances_evenly(address: str) -> None:
    broker = spawn_broker(address, "--heartbeat-timeout", "2.0")
    echoes = [spawn_echo(address, f"echo-{i}") for i in (1, 2)]
    try:
        deadline = time.monotonic() + 20
        while not {"echo-1", "echo-2"} <= set(registered(address)):
            assert time.monotonic() < deadline, "the echo actors never registered"
            time.sleep(0.05)
        clients = [BlockingActor(f"client-{i}", address, routing="direct") for i in (1, 2)]
        for client in clients:
            client.start()
            client.call(0, service="test.echo")
            while not all(p.connected for p in client.actor.directory._peers.values()):
                time.sleep(0.01)
        # Least outstanding requests sends more to whichever echo answers faster, which on a
        # busy machine is a matter of scheduling. With both echoes stopped, no reply comes back
        # while the requests go out, so each client's picks must alternate exactly.
        for echo in echoes:
            os.kill(echo.pid, signal.SIGSTOP)
        try:
            futures = [c.request(i, service="test.echo") for i in range(300) for c in clients]
            for client in clients:
                peers = client.actor.directory._peers.values()
                deadline = time.monotonic() + 10
                while sum(len(p.outstanding) for p in peers) < 300:
                    assert time.monotonic() < deadline, "the requests were never sent"
                    time.sleep(0.01)
                assert sorted(len(p.outstanding) for p in peers) == [150, 150]
        finally:
            for echo in echoes:
                os.kill(echo.pid, signal.SIGCONT)
        try:
            served = Counter(f.result(10).src for f in futures)
        finally:
            for client in clients:
                client.close()
        assert served == {"echo-1": 300, "echo-2": 300}
    finally:
        for echo in echoes:
            stop(echo)
        stop(broker)


def test_direct_routing_fails_clearly_when_no_instance_is_reachable(
    address: str, tmp_path: Path
) -> None:
    broker = spawn_broker(address)
    try:
        ghost = {"name": "ghost", "endpoint": f"ipc://{tmp_path}/nothing-listens.sock"}
        with BlockingActor("direct", address, routing="direct") as client:
            client.actor.directory.connect_timeout = 0.5
            client.actor.directory.update({"key": "service:ghost", "instances": [ghost]})
            with pytest.raises(BusError) as failed:
                client.call(service="ghost", timeout=5)
            assert failed.value.code == "unreachable"
            assert "nothing-listens.sock" in failed.value.message
        with BlockingActor("auto", address, routing="auto") as client:
            client.actor.directory.update({"key": "service:ghost", "instances": [ghost]})
            with pytest.raises(BusError) as fallback:  # through the broker, which knows no ghost
                client.call(service="ghost", timeout=5)
            assert fallback.value.code == "unknown_service"
    finally:
        stop(broker)


def test_arena_status_lists_every_actor(address: str) -> None:
    broker = spawn_broker(address)
    echo = spawn_echo(address, "echo-1")
    try:
        wait_for_service(address, "test.echo")
        time.sleep(0.5)  # a heartbeat with the echo actor's status
        table = subprocess.run(
            [sys.executable, "-m", "arena", "status", address],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert table.returncode == 0, table.stderr
        header, *rows = table.stdout.splitlines()
        assert header.split() == [
            "name",
            "kind",
            "host",
            "services",
            "endpoint",
            "version",
            "load",
            "heartbeat",
        ]
        echo_row = next(r for r in rows if r.startswith("echo-1"))
        assert "echo" in echo_row and "test.echo" in echo_row and "s ago" in echo_row
        assert ("ipc://" if address.startswith("ipc") else "tcp://127.0.0.1:") in echo_row
        listing = subprocess.run(
            [sys.executable, "-m", "arena", "status", address, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        (entry,) = [a for a in json.loads(listing.stdout) if a["name"] == "echo-1"]
        assert entry["status"] == {"load": 0}
        assert entry["last_heartbeat"] < 2.0
        down = subprocess.run(
            [sys.executable, "-m", "arena", "status", "tcp://127.0.0.1:1", "--timeout", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert down.returncode == 1 and "no broker" in down.stderr
    finally:
        stop(echo)
        stop(broker)


def test_messages_to_one_destination_keep_their_order_through_first_contact(
    address: str,
) -> None:
    broker = spawn_broker(address)
    received: list[int] = []
    try:
        with BlockingActor("target", address, services={"test.echo": lambda m: m.body}) as target:
            target.actor.on("episode", lambda m: received.append(m.body))
            with BlockingActor("sender", address, routing="auto") as sender:
                # The first of these wait for the name to resolve; the later ones must not
                # overtake them.
                for i in range(300):
                    sender.send("episode", i, service="test.echo")
                assert sender.call("done", service="test.echo") == "done"
                deadline = time.monotonic() + 5
                while len(received) < 300 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert sender.actor.counters["served_direct"] == 0  # it serves nothing
        assert received == list(range(300))
        assert target.actor.counters["served_direct"] == 1  # the "done" request came direct
    finally:
        stop(broker)


def test_a_request_pending_through_a_broker_that_restarts_fails_at_once(address: str) -> None:
    broker = spawn_broker(address, "--heartbeat-timeout", "5.0")
    slow = spawn_slow(address, "slow-1")
    try:
        wait_for_service(address, "test.slow")
        with BlockingActor("client", address, routing="brokered", heartbeat_interval=0.2) as c:
            pending = c.request(service="test.slow", timeout=120)
            time.sleep(0.3)
            broker.send_signal(signal.SIGKILL)
            broker.wait()
            broker = spawn_broker(address, "--heartbeat-timeout", "5.0")  # back within 5 s
            with pytest.raises(BusError) as failed:
                pending.result(timeout=10)
            assert failed.value.code in ("broker_lost", "actor_dead")
    finally:
        stop(slow)
        stop(broker)
