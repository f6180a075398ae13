"""``arena keys generate DIR [--client NAME ...] [--force]``: CURVE keys for a secure bus.

Writes a keypair for the broker and for each client (default: one client named ``client``),
and DIR/authorized/ with every public key: the sockets that accept connections admit only
those. Secret key files are mode 0600 and DIR is mode 0700; copy DIR to every host of the bus
by a secure channel. Then give every command the same directory::

    arena broker --bind tcp://*:5555 --keys DIR        # loads DIR/broker.key_secret
    arena rollout --connect tcp://host:5555 --keys DIR --config run.yaml
    ARENA_KEYS=DIR arena ping tcp://host:5555           # the same, through the environment

A process other than the broker uses the keypair ``client``; ``--key-name NAME``
(``ARENA_KEY_NAME``) picks another one made with ``--client NAME``. To revoke a client,
delete its file from DIR/authorized/ and restart the processes that accept connections.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["generate"], help="what to do: generate")
    parser.add_argument("directory", metavar="DIR", help="where to write the keys")
    parser.add_argument(
        "--client",
        action="append",
        default=None,
        metavar="NAME",
        help="a client keypair to make (repeatable; default: one named client)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace existing keys (locks out their holders)"
    )


def run(args: argparse.Namespace) -> int:
    from zmq.auth import load_certificate

    from arena.bus.keys import AUTHORIZED, BROKER, SecurityError, generate_keys

    clients = args.client or ["client"]
    try:
        written = generate_keys(args.directory, clients, force=args.force)
    except (SecurityError, OSError) as err:
        print(f"arena keys: {err}", file=sys.stderr)
        return 2
    directory = next(iter(written.values())).parent
    print(f"arena keys: wrote CURVE keypairs in {directory} (secret files are mode 0600)")
    for name, secret_file in written.items():
        public_file = secret_file.with_suffix(".key")
        public, _ = load_certificate(public_file)  # the public certificate only
        print(f"  {name:<12} public key {public.decode()}")
        print(f"  {'':<12} {public_file} (public), {secret_file} (secret: keep it private)")
    print(f"  authorized   {directory / AUTHORIZED}/ (public keys the bus admits)")
    print()
    print(f"Use it on every command: --keys {directory}  (or ARENA_KEYS={directory})")
    print(
        f"The broker loads the keypair {BROKER!r}; every other process loads 'client', "
        "or the one named by --key-name NAME (ARENA_KEY_NAME)."
    )
    return 0
