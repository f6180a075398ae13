"""The blocking actor: a start that fails closes what it opened, so the script can exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from arena.bus import BlockingActor, BusError
from arena.run.addresses import free_port


def test_a_failed_start_leaves_no_socket_and_no_thread() -> None:
    actor = BlockingActor("lonely", f"tcp://127.0.0.1:{free_port()}", routing="direct")
    with pytest.raises(BusError) as refused:
        actor.start(timeout=0.5)
    assert refused.value.code == "no_broker"
    assert not actor._thread.is_alive() and actor._loop.is_closed()
    assert actor.actor._broker is None and actor.actor.directory.server._server is None


def test_a_script_that_catches_a_failed_start_exits() -> None:
    """Before, the sockets stayed open and the interpreter's exit could wait on them forever."""
    script = (
        "from arena.bus import BlockingActor, BusError\n"
        f"address = 'tcp://127.0.0.1:{free_port()}'\n"
        "try:\n"
        "    BlockingActor('lonely', address, routing='direct').start(timeout=0.5)\n"
        "except BusError as err:\n"
        "    print(err.code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no_broker"
