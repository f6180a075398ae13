"""The flags of every command that joins a bus: where, and with which keys.

Bus sockets find their keys in the environment (:func:`arena.bus.security.resolve_security`
reads ``ARENA_KEYS`` and ``ARENA_INSECURE``), so :func:`apply_bus_arguments` only exports the
flags there: every socket of the process, and every child it starts, then agrees without any
argument passing. It also checks them at once, so a bad key directory or a plain public
address ends the command before it loads a model or binds a port.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def add_bus_arguments(parser: argparse.ArgumentParser, *, connect: bool = True) -> None:
    """``--connect ADDR`` (alias ``--address``; required) when ``connect``, and always
    ``--keys DIR``, ``--key-name NAME`` and ``--insecure``."""
    if connect:
        parser.add_argument(
            "--connect",
            "--address",
            dest="address",
            required=True,
            metavar="ADDR",
            help="broker address: ipc://PATH, or tcp://HOST:PORT (needs --keys unless loopback)",
        )
    parser.add_argument(
        "--keys",
        metavar="DIR",
        default=None,
        help="CURVE keys from `arena keys generate`, same as ARENA_KEYS",
    )
    parser.add_argument(
        "--key-name",
        metavar="NAME",
        default=None,
        help="which client keypair of --keys to use (default client), same as ARENA_KEY_NAME",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow plain tcp to a non-loopback address (unauthenticated, unencrypted; warns)",
    )


def apply_bus_arguments(args: argparse.Namespace) -> None:
    """Export ``--keys`` / ``--key-name`` / ``--insecure`` as ``ARENA_KEYS`` /
    ``ARENA_KEY_NAME`` / ``ARENA_INSECURE=1``, then check every address of the command.

    A command with ``args.bind`` (the broker) is checked with the broker's identity, others
    with their client keypair. Raises :class:`~arena.bus.keys.SecurityError` (a config
    error: the CLI prints it and exits 2).
    """
    from arena.bus.keys import BROKER, DEFAULT_CLIENT
    from arena.bus.security import INSECURE_ENV, KEY_NAME_ENV, KEYS_ENV, resolve_security

    if getattr(args, "keys", None):
        # Absolute, so a child started in another directory finds the same keys.
        os.environ[KEYS_ENV] = str(Path(args.keys).expanduser().resolve())
    if getattr(args, "key_name", None):
        os.environ[KEY_NAME_ENV] = args.key_name
    if getattr(args, "insecure", False):
        os.environ[INSECURE_ENV] = "1"
    address = getattr(args, "address", None)
    binds = getattr(args, "bind", None) or []
    identity = BROKER if binds and not address else DEFAULT_CLIENT
    for each in [address] if address else binds:
        resolve_security(each, identity=identity)
