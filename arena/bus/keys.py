"""CURVE key files: ``arena keys generate DIR`` writes them, every process loads its own.

``DIR/<name>.key`` holds a public certificate and ``DIR/<name>.key_secret`` a keypair (mode
0600, refused when its group or others may read it); ``DIR/authorized/`` holds the public
certificates a server admits. The broker loads ``broker``, every other process ``client`` or
the keypair ``ARENA_KEY_NAME`` names. Secret keys are never printed, logged or sent:
:class:`KeyPair` hides its secret from ``repr``. Which sockets need keys, and arming them, is
:mod:`arena.bus.security`.
"""

from __future__ import annotations

import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import zmq.auth

from arena.core.errors import ConfigError

BROKER = "broker"
DEFAULT_CLIENT = "client"
AUTHORIZED = "authorized"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


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


def unreadable_public_key(authorized: Path) -> str | None:
    """``FILE is not a public key (why)`` for the first file of ``authorized`` that a server
    could not read (garbage, cut short in a copy), or None: a CURVE server refuses to start on
    one, and ``arena deploy`` refuses to ship one."""
    for path in sorted(authorized.glob("*.key")):
        try:
            zmq.auth.load_certificate(path)
        except (OSError, ValueError) as err:
            return f"{path.name} is not a public key ({err})"
    return None


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
