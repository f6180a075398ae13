"""CURVE on the bus: key files, which addresses need keys, and real sockets (in this process and
in a child process) that admit only the authorized keys."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from zmq.auth import load_certificate

from arena.bus.keys import Security, SecurityError, generate_keys, load_security
from arena.bus.security import (
    INSECURE_ENV,
    KEY_NAME_ENV,
    KEYS_ENV,
    curve_client,
    curve_server,
    is_loopback,
    resolve_security,
)
from arena.bus.zap import denied, stop_authenticator
from arena.commands.bus_options import add_bus_arguments, apply_bus_arguments
from arena.core.errors import ConfigError
from tests import cli

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key settings from the caller's shell; whatever a test exports is undone after it."""
    for name in (KEYS_ENV, INSECURE_ENV, KEY_NAME_ENV):
        monkeypatch.setenv(name, "")  # records the original value, restored at teardown
        monkeypatch.delenv(name)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    generate_keys(directory)
    return directory


@pytest.fixture
def stranger(tmp_path: Path) -> Security:
    """A keypair made elsewhere: not in the authorized directory of ``keys``."""
    directory = tmp_path / "other"
    generate_keys(directory)
    return load_security(directory)


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    """A context of its own, terminated at the end: the authenticator must not hold it up."""
    context = zmq.Context()
    yield context
    stop_authenticator(context)
    context.destroy(linger=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def secrets_of(directory: Path) -> list[bytes]:
    found = [load_certificate(p)[1] for p in directory.glob("*.key_secret")]
    assert found and all(s and len(s) == 40 for s in found)
    return found


# -- key files ---------------------------------------------------------------------------------
def test_generate_keys_writes_private_secrets_and_public_certificates(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    written = generate_keys(directory, clients=["alice", "bob"])

    assert set(written) == {"broker", "alice", "bob"}
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for name, secret_file in written.items():
        assert secret_file == directory / f"{name}.key_secret"
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        public, secret = load_certificate(secret_file)
        assert secret is not None and len(public) == 40
        for certificate in (directory / f"{name}.key", directory / "authorized" / f"{name}.key"):
            text = certificate.read_bytes()
            assert public in text and secret not in text and b"secret-key" not in text
    authorized = sorted(p.name for p in (directory / "authorized").iterdir())
    assert authorized == ["alice.key", "bob.key", "broker.key"]


def test_generate_keys_refuses_to_overwrite_without_force(keys: Path) -> None:
    before = secrets_of(keys)
    with pytest.raises(SecurityError, match="already exist.*--force"):
        generate_keys(keys)
    assert secrets_of(keys) == before
    generate_keys(keys, force=True)
    assert set(secrets_of(keys)).isdisjoint(before)


@pytest.mark.parametrize("name", ["broker", "../escape", "a/b", ""])
def test_generate_keys_rejects_client_names_that_are_not_plain_file_names(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(SecurityError):
        generate_keys(tmp_path / "keys", clients=[name])
    assert not (tmp_path / "keys").exists()


def test_load_security_reads_the_identity_and_the_broker_key(keys: Path) -> None:
    broker = load_security(keys, "broker")
    client = load_security(keys)
    assert client.broker_public == broker.keys.public == broker.broker_public
    assert client.keys.public != broker.keys.public
    assert client.keys.secret == load_certificate(keys / "client.key_secret")[1]
    assert client.authorized == keys / "authorized"


def test_load_security_refuses_a_secret_key_others_may_read(keys: Path) -> None:
    secret_file = keys / "client.key_secret"
    secret_file.chmod(0o644)
    with pytest.raises(SecurityError) as err:
        load_security(keys)
    assert str(secret_file) in str(err.value) and f"chmod 600 {secret_file}" in str(err.value)
    load_security(keys, "broker")  # the broker's secret file is still private


def test_load_security_names_the_command_that_makes_missing_keys(tmp_path: Path) -> None:
    with pytest.raises(SecurityError, match="does not exist.*arena keys generate"):
        load_security(tmp_path / "nowhere")
    generate_keys(tmp_path / "k", clients=["alice"])
    with pytest.raises(SecurityError, match=r"client\.key_secret is missing.*'alice'.*--key-name"):
        load_security(tmp_path / "k")


def test_a_key_file_of_garbage_or_cut_short_is_named(keys: Path) -> None:
    # A malformed file the bus reads: one line naming it (a ConfigError: exit 2), never a
    # traceback from zmq's certificate parser.
    secret_file = keys / "client.key_secret"
    whole = secret_file.read_text()
    cut = whole.replace(
        whole.split('secret-key = "')[1][:40], whole.split('secret-key = "')[1][:20]
    )
    for text, message in (
        ("garbage", f"cannot read key file {secret_file}: No public key found"),
        (cut, f"key file {secret_file} holds a malformed key (not 40 z85 characters)"),
    ):
        secret_file.write_text(text)
        with pytest.raises(SecurityError) as err:
            load_security(keys)
        assert str(err.value).startswith(message), err.value


def test_security_error_is_a_config_error_so_the_cli_exits_2() -> None:
    assert issubclass(SecurityError, ConfigError) and issubclass(SecurityError, ValueError)


def test_repr_never_shows_a_secret(keys: Path) -> None:
    security = load_security(keys)
    for text in (repr(security), str(security), repr(security.keys), f"{security}"):
        assert security.keys.secret.decode() not in text
        assert security.keys.public.decode() in text


# -- which addresses need keys -----------------------------------------------------------------
ADDRESSES = {
    "ipc:///tmp/arena.sock": True,
    "inproc://bus": True,
    "tcp://127.0.0.1:5555": True,
    "tcp://127.1.2.3:5555": True,
    "tcp://localhost:5555": True,
    "tcp://[::1]:5555": True,
    "tcp://*:5555": False,
    "tcp://0.0.0.0:5555": False,
    "tcp://[::]:5555": False,
    "tcp://10.1.2.3:5555": False,
    "tcp://broker.example.com:5555": False,
    "tcp://eth0:5555": False,
    "tcp://127.0.0.1:0;10.1.2.3:5555": False,
}


@pytest.mark.parametrize(("address", "loopback"), ADDRESSES.items())
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


@pytest.mark.parametrize(("address", "loopback"), ADDRESSES.items())
def test_resolve_security_demands_keys_off_loopback(
    address: str, loopback: bool, keys: Path
) -> None:
    assert isinstance(resolve_security(address, keys_dir=keys), Security)  # keys: always CURVE
    if loopback:
        assert resolve_security(address) is None
    else:
        with pytest.raises(SecurityError, match="arena keys generate.*--insecure"):
            resolve_security(address)


def test_resolve_security_falls_back_to_the_environment(
    keys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, str(keys))
    found = resolve_security("tcp://10.1.2.3:5555")
    assert found == load_security(keys)
    assert resolve_security("tcp://10.1.2.3:5555", identity="broker") == load_security(
        keys, "broker"
    )
    generate_keys(keys, clients=["alice"], force=True)
    monkeypatch.setenv(KEY_NAME_ENV, "alice")
    assert resolve_security("ipc:///x").keys == load_security(keys, "alice").keys
    monkeypatch.setenv(KEYS_ENV, str(tmp_path / "missing"))
    with pytest.raises(SecurityError, match="arena keys generate"):
        resolve_security("ipc:///x")  # keys named but broken: an error, never plain


def test_insecure_allows_plain_tcp_with_a_loud_warning(
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    address = f"tcp://10.1.2.3:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="arena.bus"):
        assert resolve_security(address, insecure=True) is None
    assert "unauthenticated and unencrypted" in capsys.readouterr().err
    assert any(
        r.name == "arena.bus" and "unauthenticated and unencrypted" in r.getMessage()
        for r in caplog.records
    )
    monkeypatch.setenv(INSECURE_ENV, "1")
    other = f"tcp://10.1.2.4:{free_port()}"
    assert resolve_security(other) is None
    assert other in capsys.readouterr().err


def test_bus_flags_export_keys_and_report_errors_before_anything_starts(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = argparse.ArgumentParser()
    add_bus_arguments(parser)
    args = parser.parse_args(["--address", "tcp://10.1.2.3:5555", "--keys", str(keys)])
    apply_bus_arguments(args)
    assert os.environ[KEYS_ENV] == str(keys.resolve())
    assert resolve_security("tcp://10.1.2.3:5555") is not None  # what the sockets will see

    monkeypatch.delenv(KEYS_ENV)
    args = parser.parse_args(["--connect", "tcp://10.1.2.3:5555"])
    with pytest.raises(SecurityError):
        apply_bus_arguments(args)
    apply_bus_arguments(parser.parse_args(["--connect", "tcp://10.1.2.3:5555", "--insecure"]))
    assert os.environ[INSECURE_ENV] == "1"


# -- real sockets ------------------------------------------------------------------------------
def curve_router(ctx: zmq.Context, security: Security) -> tuple[zmq.Socket, str]:
    router = ctx.socket(zmq.ROUTER)
    router.linger = 0
    curve_server(router, security)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    return router, f"tcp://127.0.0.1:{port}"


def dealer(
    ctx: zmq.Context, endpoint: str, security: Security | None, server_public: bytes
) -> zmq.Socket:
    """A DEALER connected to ``endpoint`` that has sent ``b"hello"``, if it still could.

    A refused handshake can leave the DEALER with no peer (measured: 8 sends of 100 made 0-500
    ms after the connect found none), and a DEALER with no peer blocks on send, here for the
    10 minutes of pytest's timeout once on a busy host. Where the refusal beat the send, nothing
    is sent, and nothing could get through anyway."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if security is not None:
        curve_client(sock, security, server_public)
    sock.connect(endpoint)
    with contextlib.suppress(zmq.Again):
        sock.send(b"hello", zmq.NOBLOCK)
    return sock


def wait_until(condition: object, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_an_authorized_client_talks_both_ways(
    ctx: zmq.Context, keys: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    broker, client = load_security(keys, "broker"), load_security(keys)
    router, endpoint = curve_router(ctx, broker)
    sock = dealer(ctx, endpoint, client, client.broker_public)
    assert router.poll(2000)
    identity, body = router.recv_multipart()
    assert body == b"hello"
    router.send_multipart([identity, b"welcome"])
    assert sock.poll(2000) and sock.recv() == b"welcome"
    for secret in secrets_of(keys):
        assert secret.decode() not in caplog.text


def test_unauthorized_and_plain_clients_get_nothing_through(
    ctx: zmq.Context, keys: Path, stranger: Security, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    broker = load_security(keys, "broker")
    router, endpoint = curve_router(ctx, broker)
    before = denied(ctx)
    # Held in a list: a socket that is garbage-collected closes, and would prove nothing.
    clients = [
        dealer(ctx, endpoint, stranger, broker.keys.public),  # CURVE, but a key not authorized
        dealer(ctx, endpoint, None, b""),  # no CURVE at all
    ]
    assert wait_until(lambda: denied(ctx) > before), "the authenticator refused nothing"
    assert router.poll(500) == 0
    assert denied() >= denied(ctx) > before
    refusals = [r for r in caplog.records if r.levelno == logging.WARNING and "refused" in r.msg]
    assert refusals and stranger.keys.public.decode() in refusals[0].getMessage()
    assert stranger.keys.secret.decode() not in caplog.text
    # The authorized client still gets through the same socket.
    client = load_security(keys)
    clients.append(dealer(ctx, endpoint, client, client.broker_public))
    assert router.poll(2000) and router.recv_multipart()[1] == b"hello"


def test_a_client_will_not_talk_to_a_server_without_the_brokers_secret(
    ctx: zmq.Context, keys: Path, tmp_path: Path
) -> None:
    # An impostor server that even authorizes the client's key, but holds another keypair.
    impostor_dir = tmp_path / "impostor"
    generate_keys(impostor_dir)
    (impostor_dir / "authorized" / "victim.key").write_bytes((keys / "client.key").read_bytes())
    router, endpoint = curve_router(ctx, load_security(impostor_dir, "broker"))
    client = load_security(keys)
    fooled = dealer(ctx, endpoint, client, client.broker_public)
    assert router.poll(500) == 0
    # A plain server cannot read a CURVE client either.
    plain = ctx.socket(zmq.ROUTER)
    plain.linger = 0
    port = plain.bind_to_random_port("tcp://127.0.0.1")
    plain_peer = dealer(ctx, f"tcp://127.0.0.1:{port}", client, client.broker_public)
    assert plain.poll(300) == 0
    assert not fooled.closed and not plain_peer.closed
    assert fooled.poll(0) == 0 and plain_peer.poll(0) == 0


def test_term_is_not_held_up_by_the_authenticator(keys: Path) -> None:
    context = zmq.Context()
    router, _ = curve_router(context, load_security(keys, "broker"))
    router.close()
    done = threading.Thread(target=context.term, daemon=True)
    done.start()
    done.join(5.0)
    assert not done.is_alive(), "context.term() hung on the authenticator's socket"


CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys, time, zmq
    from arena.bus.keys import load_security
    from arena.bus.security import curve_client

    keys_dir, broker_dir, endpoint = sys.argv[1:]
    security = load_security(keys_dir)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.linger = 0
    curve_client(sock, security, load_security(broker_dir).broker_public)
    sock.connect(endpoint)
    for _ in range(10):
        try:
            sock.send(b"from a child", zmq.NOBLOCK)  # blocks while no handshake succeeded
        except zmq.Again:
            pass
        if sock.poll(100):
            print("answered", sock.recv())
            break
    sock.close()
    """
)


@pytest.mark.parametrize("authorized", [True, False])
def test_a_client_in_another_process_needs_an_authorized_key(
    ctx: zmq.Context, keys: Path, tmp_path: Path, authorized: bool
) -> None:
    router, endpoint = curve_router(ctx, load_security(keys, "broker"))
    client_keys = keys
    if not authorized:
        client_keys = tmp_path / "other"
        generate_keys(client_keys)
    before = denied(ctx)
    child = subprocess.Popen(
        [sys.executable, "-c", CLIENT_SCRIPT, str(client_keys), str(keys), endpoint],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    got = []
    try:
        deadline = time.monotonic() + 20
        while child.poll() is None and time.monotonic() < deadline:  # the child tries for ~1 s
            if router.poll(50):
                identity, body = router.recv_multipart()
                got.append(body)
                router.send_multipart([identity, b"hi"])
        out, err = child.communicate(timeout=5)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert got == ([b"from a child"] if authorized else [])
    assert ("answered" in out) is authorized
    assert (denied(ctx) > before) is not authorized


# -- the command line --------------------------------------------------------------------------
def arena(*args: str) -> subprocess.CompletedProcess[str]:
    """The command without this environment's keys or insecure flag."""
    bare = {k: v for k, v in os.environ.items() if k not in (KEYS_ENV, INSECURE_ENV)}
    return cli.arena(*args, timeout=60, env=bare)


def test_keys_generate_prints_public_keys_and_no_secret(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    done = arena("keys", "generate", str(directory), "--client", "alice", "--client", "bob")
    assert done.returncode == 0, done.stderr
    for name in ("broker", "alice", "bob"):
        public = load_certificate(directory / f"{name}.key")[0]
        assert public.decode() in done.stdout
    assert f"--keys {directory}" in done.stdout and "ARENA_KEYS" in done.stdout
    for secret in secrets_of(directory):
        assert secret.decode() not in done.stdout + done.stderr

    again = arena("keys", "generate", str(directory))
    assert again.returncode == 2
    assert "already exist" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr


def test_commands_refuse_plain_public_tcp_and_bad_keys_with_exit_code_2(tmp_path: Path) -> None:
    plain = arena("ping", "tcp://10.1.2.3:5555", "--timeout", "0.1")
    assert plain.returncode == 2
    assert "arena keys generate" in plain.stderr and "Traceback" not in plain.stderr

    missing = arena("broker", "--bind", "tcp://127.0.0.1:5555", "--keys", str(tmp_path / "no"))
    assert missing.returncode == 2
    assert "arena keys generate" in missing.stderr and "Traceback" not in missing.stderr

    # an address with no ZeroMQ transport is named as such, not as plain public tcp
    for address in ("bogus://x", "127.0.0.1:5555"):
        wrong = arena("broker", "--bind", address)
        assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
        assert f"bus address {address!r} names no ZeroMQ transport" in wrong.stderr
        assert "arena keys generate" not in wrong.stderr


def test_a_public_key_of_garbage_in_authorized_is_named(keys: Path) -> None:
    # The broker said only "cannot load the public keys in DIR" (the file was in pyzmq's log).
    (keys / "authorized" / "client.key").write_bytes(b"\xff\xfe garbage")
    context = zmq.Context()
    try:
        with pytest.raises(SecurityError) as err:
            curve_router(context, load_security(keys, "broker"))
    finally:
        threading.Thread(target=context.term, daemon=True).start()
    assert str(err.value).startswith(
        f"cannot load the public keys in {keys / 'authorized'}: client.key is not a public key ("
    )
