"""Which bus sockets need CURVE keys, and arming a socket with them.

Plain ZeroMQ lets anyone who can reach a port join the bus and read every message on it. With
keys, every socket speaks CURVE: traffic is encrypted, a client must know the broker's public
key, and a server admits only the public keys in the ``authorized`` directory that
``arena keys generate DIR`` writes. Without keys, plain sockets are allowed only where no one
else can listen (``ipc://``, ``inproc://``, ``tcp://`` to a loopback address); plain ``tcp://``
to any other address needs an explicit ``--insecure`` (``ARENA_INSECURE=1``).

A process finds its keys in ``ARENA_KEYS`` (set by ``--keys`` on every command), so every
socket it opens, and every child it starts, uses them without any argument passing. The key
files are :mod:`arena.bus.keys`; the thread that checks each handshake is :mod:`arena.bus.zap`.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
import threading
from pathlib import Path

import zmq

from arena.bus.keys import DEFAULT_CLIENT, Security, SecurityError, load_security
from arena.bus.sockets import check_address
from arena.bus.zap import admit_from

log = logging.getLogger("arena.bus")

KEYS_ENV = "ARENA_KEYS"
"""A directory made by ``arena keys generate``: CURVE on for every bus socket."""
INSECURE_ENV = "ARENA_INSECURE"
"""``1``: allow plain tcp to a non-loopback address (with a warning)."""
KEY_NAME_ENV = "ARENA_KEY_NAME"
"""Which client keypair of the key directory a non-broker process loads (default ``client``)."""

_TRUE = {"1", "true", "yes", "on"}


# -- which addresses need keys -----------------------------------------------------------------
def keys_hint(address: str) -> str:
    """Why a broker that listens at ``address`` may still not answer: one with CURVE keys drops
    a handshake whose key it does not admit (or a plain one) without a word, so a wrong or
    missing key looks exactly like a missing broker. Empty off tcp, where no keys are used."""
    if not address.startswith("tcp://"):
        return ""
    if os.environ.get(KEYS_ENV):
        return "; if the broker is up, it may not allow these keys (its authorized/ directory)"
    return (
        "; if the broker is up, it may require CURVE keys: pass --keys DIR "
        "(the directory of `arena keys generate`)"
    )


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

    Keys are checked by the ZAP authenticator of the socket's context (:mod:`arena.bus.zap`),
    which re-reads the directory for every socket made.
    """
    authorized = Path(security.authorized)
    if not authorized.is_dir():
        raise SecurityError(
            f"authorized keys directory {authorized} does not exist; "
            f"run `arena keys generate {authorized.parent}`"
        )
    if not any(authorized.glob("*.key")):
        raise SecurityError(f"{authorized} holds no public key (*.key): no client could connect")
    domain = admit_from(sock.context, authorized)
    sock.curve_secretkey = security.keys.secret
    sock.curve_publickey = security.keys.public
    sock.curve_server = True
    sock.zap_domain = domain.encode()


def curve_client(sock: zmq.Socket, security: Security, server_public: bytes) -> None:
    """Make ``sock`` (before connect) a CURVE client of the server whose public key is given."""
    sock.curve_secretkey = security.keys.secret
    sock.curve_publickey = security.keys.public
    sock.curve_serverkey = server_public
