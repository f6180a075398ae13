"""CURVE authentication and encryption for the bus, through ZeroMQ's ZAP.

Plain ZeroMQ lets anyone who can reach a port join the bus and read every message on it. With
keys, every socket speaks CURVE: traffic is encrypted, a client must know the broker's public
key, and a server admits only the public keys in the ``authorized`` directory that
``arena keys generate DIR`` writes. Without keys, plain sockets are allowed only where no one
else can listen (``ipc://``, ``inproc://``, ``tcp://`` to a loopback address); plain ``tcp://``
to any other address needs an explicit ``--insecure`` (``ARENA_INSECURE=1``).

A process finds its keys in ``ARENA_KEYS`` (set by ``--keys`` on every command), so every
socket it opens, and every child it starts, uses them without any argument passing. It loads
``<identity>.key_secret``: ``broker`` for the broker, ``client`` (or ``ARENA_KEY_NAME``) for
everyone else. Secret keys are never printed, logged or sent: :class:`KeyPair` hides its
secret from ``repr`` and the authenticator logs only public keys.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import ipaddress
import logging
import os
import re
import shutil
import stat
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from arena.bus.sockets import check_address
from arena.core.errors import ConfigError

log = logging.getLogger("arena.bus")

KEYS_ENV = "ARENA_KEYS"
"""A directory made by ``arena keys generate``: CURVE on for every bus socket."""
INSECURE_ENV = "ARENA_INSECURE"
"""``1``: allow plain tcp to a non-loopback address (with a warning)."""
KEY_NAME_ENV = "ARENA_KEY_NAME"
"""Which client keypair of the key directory a non-broker process loads (default ``client``)."""

BROKER = "broker"
DEFAULT_CLIENT = "client"
AUTHORIZED = "authorized"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TRUE = {"1", "true", "yes", "on"}


class SecurityError(ConfigError):
    """Keys that cannot be used, or an address that may not be used without them.

    A :class:`~arena.core.errors.ConfigError` (so a :class:`ValueError`): the CLI prints the
    message and exits with code 2, without a traceback.
    """


@dataclass(frozen=True)
class KeyPair:
    """A CURVE keypair, both halves z85-encoded (40 bytes)."""

    public: bytes
    secret: bytes = field(repr=False)
    """Never printed, logged or sent: ``repr`` leaves it out."""


@dataclass(frozen=True)
class Security:
    """What one process needs to open CURVE sockets."""

    keys: KeyPair
    """This process's keypair: the server key on sockets it binds, the client key on the
    sockets it connects."""
    broker_public: bytes
    """The broker's public key (z85), to connect to it."""
    authorized: Path
    """Directory of the public certificates (``*.key``) a server socket admits."""


# -- key files ---------------------------------------------------------------------------------
def generate_keys(
    directory: str | Path, clients: Sequence[str] = (DEFAULT_CLIENT,), force: bool = False
) -> dict[str, Path]:
    """Write a keypair for the broker and each client, and the ``authorized`` directory.

    ``DIR/<name>.key`` holds a public certificate, ``DIR/<name>.key_secret`` the keypair (mode
    0600); ``DIR/authorized/<name>.key`` repeats every public certificate, for ZAP. ``DIR`` is
    made mode 0700 before any secret is written, so no secret is ever readable by others, even
    for the moment between writing and chmod. Existing keys are kept unless ``force``: replacing
    them locks out every process that still holds the old ones. Returns name -> secret file.
    """
    names = [BROKER, *clients]
    for name in clients:
        if name == BROKER:
            raise SecurityError(f"{BROKER!r} is the broker's keypair; pick another client name")
        if not _NAME.fullmatch(name):
            raise SecurityError(
                f"client name {name!r} must be letters, digits, '_', '.' or '-' "
                "(it becomes a file name)"
            )
    if len(set(names)) != len(names):
        raise SecurityError(f"client names repeat: {list(clients)}")
    root = Path(directory)
    authorized = root / AUTHORIZED
    targets = [
        path
        for name in names
        for path in (root / f"{name}.key", root / f"{name}.key_secret", authorized / f"{name}.key")
    ]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        raise SecurityError(
            f"keys already exist: {', '.join(existing)}; pass --force to replace them "
            "(every process holding the old keys will be locked out)"
        )
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    authorized.mkdir(exist_ok=True)
    written = {}
    for name in names:
        public_file, secret_file = zmq.auth.create_certificates(root, name)
        Path(secret_file).chmod(0o600)
        shutil.copyfile(public_file, authorized / f"{name}.key")
        written[name] = Path(secret_file)
    return written


def load_security(directory: str | Path, identity: str = DEFAULT_CLIENT) -> Security:
    """Load ``DIR/<identity>.key_secret`` and the broker's public key ``DIR/broker.key``.

    A secret file that its group or others may read is refused: a leaked secret key lets
    anyone impersonate this process, so it is better to stop than to run with it.
    """
    root = Path(directory)
    hint = f"run `arena keys generate {root}` to make keys"
    if not root.is_dir():
        raise SecurityError(f"key directory {root} does not exist; {hint}")
    secret_file = root / f"{identity}.key_secret"
    broker_file = root / f"{BROKER}.key"
    for path, what in (
        (secret_file, f"the secret key of {identity!r}"),
        (broker_file, "the broker's public key"),
    ):
        if not path.is_file():
            raise SecurityError(f"{path} is missing ({what}); {hint}{_others(root, identity)}")
    mode = stat.S_IMODE(secret_file.stat().st_mode)
    if mode & 0o077:
        raise SecurityError(
            f"secret key file {secret_file} has mode {mode:04o}: group and others may read it; "
            f"fix it with `chmod 600 {secret_file}`"
        )
    public, secret = _load_certificate(secret_file)
    if secret is None:
        raise SecurityError(f"{secret_file} holds no secret key; {hint}")
    broker_public, _ = _load_certificate(broker_file)
    return Security(
        keys=KeyPair(public=public, secret=secret),
        broker_public=broker_public,
        authorized=root / AUTHORIZED,
    )


def _others(root: Path, identity: str) -> str:
    """A hint naming the keypairs the directory does hold, for a missing one."""
    names = sorted(p.name.removesuffix(".key_secret") for p in root.glob("*.key_secret"))
    names = [n for n in names if n not in (identity, BROKER)]
    if not names:
        return ""
    return f", or pick one of its keypairs {names} with --key-name (ARENA_KEY_NAME)"


def _load_certificate(path: Path) -> tuple[bytes, bytes | None]:
    """A certificate's keys, checked to be 40-byte z85, with an error naming the file."""
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as err:
        raise SecurityError(f"cannot read key file {path}: {err}") from None
    for key in (public, secret):
        if key is not None and len(key) != 40:
            raise SecurityError(f"key file {path} holds a malformed key (not 40 z85 characters)")
    if public is None:
        raise SecurityError(f"key file {path} holds no public key")
    return public, secret


# -- which addresses need keys -----------------------------------------------------------------
def is_loopback(address: str) -> bool:
    """Whether plain traffic to ``address`` stays on this host.

    ``tcp://*``, ``0.0.0.0``, interface names and every other host count as reachable from
    elsewhere; host names are not resolved (``localhost`` aside), so the answer never depends
    on DNS.
    """
    if address.startswith(("ipc://", "inproc://")):
        return True
    if not address.startswith("tcp://"):
        return False
    endpoint = address[len("tcp://") :].rpartition(";")[2]  # tcp://source;destination
    if endpoint.startswith("["):  # [IPv6]:port
        host = endpoint[1:].partition("]")[0]
    else:
        host = endpoint.rpartition(":")[0] if ":" in endpoint else endpoint
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


_warned: set[str] = set()
_warned_lock = threading.Lock()
_atexit_registered = False


def resolve_security(
    address: str,
    keys_dir: str | Path | None = None,
    insecure: bool | None = None,
    identity: str = DEFAULT_CLIENT,
) -> Security | None:
    """The keys for a socket on ``address``, or ``None`` for a plain socket.

    ``None`` arguments fall back to ``ARENA_KEYS`` / ``ARENA_INSECURE`` (and ``ARENA_KEY_NAME``
    replaces the default identity ``client``). With keys, CURVE is on whatever the transport.
    Without, loopback is plain; any other tcp address raises :class:`SecurityError` unless
    ``insecure``, which warns once per address and process (on the ``arena.bus`` logger and on
    stderr, so it shows even where logging is not configured).
    """
    if keys_dir is None:
        keys_dir = os.environ.get(KEYS_ENV) or None
    if insecure is None:
        insecure = os.environ.get(INSECURE_ENV, "").strip().lower() in _TRUE
    if identity == DEFAULT_CLIENT:
        identity = os.environ.get(KEY_NAME_ENV) or DEFAULT_CLIENT
    check_address(address)  # before the loopback rule, which would call it public tcp
    if keys_dir is not None:
        return load_security(keys_dir, identity)
    if is_loopback(address):
        return None
    if not insecure:
        raise SecurityError(
            f"bus address {address} is reachable from other hosts, and without keys its "
            "traffic would be unauthenticated and unencrypted; make keys with "
            "`arena keys generate DIR` and pass --keys DIR (or set ARENA_KEYS=DIR) to every "
            "command, or pass --insecure (ARENA_INSECURE=1) to allow plain tcp"
        )
    with _warned_lock:
        first = address not in _warned
        _warned.add(address)
    if first:
        text = f"INSECURE: bus traffic on {address} is unauthenticated and unencrypted"
        log.warning("%s (--insecure)", text)
        print(f"arena: {text}", file=sys.stderr, flush=True)
    return None


# -- sockets -----------------------------------------------------------------------------------
def curve_server(sock: zmq.Socket, security: Security) -> None:
    """Make ``sock`` (before bind) a CURVE server admitting only ``security.authorized``.

    Keys are checked by the ZAP authenticator of the socket's context, started here if need
    be. Each authorized directory gets its own ZAP domain, so sockets of one process that
    admit different key sets do not share a list. The certificates are re-read on every call:
    a key added to the directory is admitted by the next socket made.
    """
    authorized = Path(security.authorized)
    if not authorized.is_dir():
        raise SecurityError(
            f"authorized keys directory {authorized} does not exist; "
            f"run `arena keys generate {authorized.parent}`"
        )
    if not any(authorized.glob("*.key")):
        raise SecurityError(f"{authorized} holds no public key (*.key): no client could connect")
    domain = _domain(authorized)
    authenticator = _authenticator(sock.context)
    authenticator.configure_curve(domain=domain, location=str(authorized))
    if domain not in authenticator.certs:  # pyzmq logs a load failure instead of raising
        raise SecurityError(f"cannot load the public keys in {authorized}")
    sock.curve_secretkey = security.keys.secret
    sock.curve_publickey = security.keys.public
    sock.curve_server = True
    sock.zap_domain = domain.encode()


def curve_client(sock: zmq.Socket, security: Security, server_public: bytes) -> None:
    """Make ``sock`` (before connect) a CURVE client of the server whose public key is given."""
    sock.curve_secretkey = security.keys.secret
    sock.curve_publickey = security.keys.public
    sock.curve_serverkey = server_public


def denied(context: zmq.Context | None = None) -> int:
    """How many ZAP handshakes this process refused: on ``context``'s authenticator, or on
    all of them when ``context`` is ``None``."""
    with _lock:
        if context is not None:
            auth = _authenticators.get(context)
            return auth.denied if auth is not None else 0
        return sum(auth.denied for auth in _authenticators.values())


def stop_authenticator(context: zmq.Context | None = None) -> None:
    """Stop the authenticator of ``context`` (of every context when ``None``); its refusals
    are no longer counted by :func:`denied`.

    Runs at exit on its own. ``context.term()`` does not need it: the thread closes its socket
    as soon as its context terminates.
    """
    with _lock:
        if context is None:
            stopping = list(_authenticators.values())
            _authenticators.clear()
        else:
            auth = _authenticators.pop(context, None)
            stopping = [auth] if auth is not None else []
    for auth in stopping:
        auth.stop()


# -- the authenticator -------------------------------------------------------------------------
class _Authenticator(ThreadAuthenticator):
    """A ZAP handler thread that counts the handshakes it refuses, logs each refused key once
    (a refused client retries every reconnect interval), and survives ``context.term()``.

    pyzmq's own thread runs an asyncio poller that spins forever once its context is
    terminated, and keeps two sockets open that make ``term()`` itself hang. This one owns a
    single socket, made, used and closed in its own thread: it closes it as soon as the
    context terminates, and checks a stop flag between polls.
    """

    POLL_MS = 100
    """How often the thread checks the stop flag: the most :meth:`stop` waits."""

    def __init__(self, context: zmq.Context) -> None:
        super().__init__(context, log=logging.getLogger("arena.bus.auth"))
        self.denied = 0
        self._stopping = threading.Event()
        self._request: tuple[str, bytes] = ("", b"")
        self._reported: set[tuple[str, bytes]] = set()

    def start(self) -> None:
        started = threading.Event()
        failure: list[BaseException] = []
        self.thread = threading.Thread(  # type: ignore[assignment]
            target=self._serve, args=(started, failure), name="arena-zap", daemon=True
        )
        self.thread.start()
        started.wait()
        if failure:
            raise failure[0]

    def _serve(self, started: threading.Event, failure: list[BaseException]) -> None:
        try:
            super(ThreadAuthenticator, self).start()  # binds the ZAP socket in this thread
        except BaseException as err:
            failure.append(err)
            started.set()
            return
        started.set()
        loop = asyncio.new_event_loop()
        sock = self.zap_socket
        try:
            while not self._stopping.is_set():
                if sock.poll(self.POLL_MS):
                    loop.run_until_complete(self.handle_zap_message(sock.recv_multipart()))
        except zmq.ContextTerminated:
            pass  # the context is being terminated: close our socket so term() can finish
        except Exception:
            self.log.exception("the bus authenticator stopped: new connections will fail")
        finally:
            sock.close(linger=0)
            loop.close()

    def stop(self) -> None:
        """Stop the thread and wait for it (a bounded time: the thread is a daemon)."""
        self._stopping.set()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    def is_alive(self) -> bool:
        return bool(self.thread and self.thread.is_alive())

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        # Remember who is asking, for the log line of a refusal; the credentials frame of a
        # CURVE request is the client's public key, never a secret.
        address = msg[3].decode("utf-8", "replace") if len(msg) > 3 else "?"
        key = msg[6] if len(msg) > 6 and msg[5:6] == [b"CURVE"] else b""
        self._request = (address, key)
        await super().handle_zap_message(msg)

    def _send_zap_reply(
        self,
        request_id: bytes,
        status_code: bytes,
        status_text: bytes,
        user_id: str = "anonymous",
    ) -> None:
        if status_code != b"200":
            self.denied += 1  # only this thread writes it
            address, key = self._request
            public = z85.encode(key).decode() if len(key) == 32 else "none"
            level = logging.DEBUG if (address, key) in self._reported else logging.WARNING
            self._reported.add((address, key))
            self.log.log(
                level,
                "refused a bus connection from %s (public key %s): %s",
                address,
                public,
                status_text.decode("utf-8", "replace"),
            )
        super()._send_zap_reply(request_id, status_code, status_text, user_id)


_authenticators: dict[Any, _Authenticator] = {}
_lock = threading.Lock()
_atexit_registered = False


def _authenticator(context: zmq.Context) -> _Authenticator:
    """The running authenticator of ``context``, started on first use (ZAP allows one per
    context: it binds ``inproc://zeromq.zap.01``)."""
    with _lock:
        global _atexit_registered
        for gone in [c for c in _authenticators if c.closed]:  # terminated: forget them
            del _authenticators[gone]
        auth = _authenticators.get(context)
        if auth is not None and not auth.is_alive():
            auth.stop()  # its thread died: free the ZAP endpoint for a new one
            auth = None
        if auth is None:
            if not _atexit_registered:
                atexit.register(stop_authenticator)
                _atexit_registered = True
            auth = _Authenticator(context)
            auth.start()
            _authenticators[context] = auth
        return auth


def _domain(authorized: Path) -> str:
    """The ZAP domain of one authorized directory: short, stable, and distinct per directory."""
    digest = hashlib.sha256(str(authorized.resolve()).encode()).hexdigest()[:16]
    return f"arena-{digest}"
