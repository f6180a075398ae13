"""An actor's own direct socket: bad input gets error replies and counters, good requests and
episodes reach their handlers, with a real broker and a rogue peer.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_direct_socket.py``.
"""

from __future__ import annotations

import os
import shutil
import socket as pysocket
import tempfile
import time

import msgpack
import pytest
import zmq

from arena.bus import BlockingActor, encode
from tests.arena.bus.conftest import spawn, spawn_broker, stop


def test_bad_input_on_a_direct_socket_gets_error_replies(address: str) -> None:
    broker = spawn_broker(address)
    seen: list[object] = []
    try:
        with BlockingActor(
            "target",
            address,
            services={"test.echo": lambda m: m.body},
            max_message_bytes=1 << 16,
        ) as target:
            target.actor.on("episode", lambda m: seen.append(m.body))
            endpoint = target.actor.directory.endpoint
            assert endpoint is not None
            rogue = zmq.Context.instance().socket(zmq.DEALER)
            rogue.setsockopt(zmq.ROUTING_ID, b"rogue")
            rogue.connect(endpoint)

            def answer(*frames: object) -> dict[str, object]:
                rogue.send_multipart(list(frames))
                assert rogue.poll(5000), "no error reply"
                header = msgpack.unpackb(rogue.recv_multipart()[0])
                assert header["type"] == "error", header
                return msgpack.unpackb(header["body"])

            assert answer(b"\xc1 not msgpack")["code"] == "malformed"
            _, spoofed = encode("request", 1, src="someone-else", service="test.echo")
            assert answer(*spoofed)["code"] == "schema"
            _, heartbeat = encode("heartbeat", None, src="rogue")
            assert answer(*heartbeat)["code"] == "schema"
            _, big = encode("request", b"x" * (1 << 17), src="rogue", service="test.echo")
            assert answer(*big)["code"] == "too_large"
            _, good = encode("request", {"ok": 1}, src="rogue", service="test.echo")
            rogue.send_multipart(good)
            assert rogue.poll(5000)
            header = msgpack.unpackb(rogue.recv_multipart()[0])
            assert header["type"] == "reply" and msgpack.unpackb(header["body"]) == {"ok": 1}
            rogue.close(linger=0)
            counters = target.actor.counters
            assert counters["malformed"] == 1 and counters["schema"] == 2
            assert counters["too_large"] == 1
            # Episodes reach their handler peer to peer as well.
            with BlockingActor("sender", address, routing="direct") as sender:
                sender.call(0, service="test.echo")
                sender.send("episode", {"id": "e-1"}, dst="target")
                deadline = time.monotonic() + 5
                while not seen and time.monotonic() < deadline:
                    time.sleep(0.01)
            assert seen == [{"id": "e-1"}]
    finally:
        stop(broker)


def test_a_deep_temp_directory_still_gives_a_socket_that_binds(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deep TMPDIR (a test's own, under pytest-xdist) put an actor's socket at 114 bytes, past
    a unix socket's 107: the inference actor of `arena eval` exited at start. It now goes to
    /tmp where the temp directory leaves no room."""
    from arena.bus.peers import IPC_PATH_LIMIT, listen_address, socket_temp_dir

    deep = tmp_path_factory.mktemp("d" * 60)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    broker = f"ipc://{deep}/arena-tournament-abcdefgh/bus.sock"
    path = listen_address(broker, "inference-model-0").removeprefix("ipc://")
    assert len(path) <= IPC_PATH_LIMIT and path.startswith("/tmp/arena-inference-model-0-")
    socket = zmq.Context.instance().socket(zmq.ROUTER)
    try:
        socket.bind(f"ipc://{path}")
    finally:
        socket.close(linger=0)
        os.unlink(path)
    monkeypatch.setattr(tempfile, "tempdir", "/tmp/short")
    assert socket_temp_dir(40) == "/tmp/short"


def test_an_actor_clears_the_socket_files_killed_processes_left_before_it_binds() -> None:
    """SIGKILL leaves a process's socket file behind; the suite's runs left over a hundred in
    /tmp. A file goes once its process is gone, nothing listens on it and it is not brand new."""
    directory = tempfile.mkdtemp(prefix="arena-stale-", dir="/tmp")  # short: a socket path
    victim = spawn(
        "-c",
        "import os, time, zmq\n"
        "s = zmq.Context().socket(zmq.ROUTER)\n"
        f"s.bind('ipc://{directory}/rollout-0-%d-abc123.sock' % os.getpid())\n"
        "print('bound', flush=True)\n"
        "time.sleep(60)\n",
    )
    assert victim.stdout is not None and victim.stdout.readline().strip() == "bound"
    victim.kill()
    victim.wait()
    left = f"{directory}/rollout-0-{victim.pid}-abc123.sock"
    young = f"{directory}/learner-{victim.pid}-def456.sock"  # bound, maybe not listening yet
    listened = f"{directory}/other-{victim.pid}-0a1b2c.sock"  # a pid of another namespace
    not_a_socket = f"{directory}/notes-{victim.pid}-0d0e0f.sock"
    open(not_a_socket, "w").close()
    with pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM) as sock:
        sock.bind(young)  # and never listens
    listener = zmq.Context.instance().socket(zmq.ROUTER)
    listener.bind(f"ipc://{listened}")
    an_hour_ago = time.time() - 3600
    for path in (left, listened, not_a_socket):
        os.utime(path, (an_hour_ago, an_hour_ago))
    broker = spawn_broker(f"ipc://{directory}/bus.sock")
    try:
        with BlockingActor("server", f"ipc://{directory}/bus.sock", services={"s": id}):
            remaining = os.listdir(directory)
    finally:
        stop(broker)
        listener.close(linger=0)
        shutil.rmtree(directory)
    assert os.path.basename(left) not in remaining
    for kept in (young, listened, not_a_socket, "bus.sock"):
        assert os.path.basename(kept) in remaining
    assert any(name.startswith(f"server-{os.getpid()}-") for name in remaining)
