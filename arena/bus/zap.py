"""The ZAP authenticator: the thread that admits or refuses every CURVE handshake of a process.

ZeroMQ asks a ZAP handler (one per context, bound at ``inproc://zeromq.zap.01``) whether each
connecting client's public key may come in. :func:`admit_from` starts that thread for a socket's
context on first use and points a ZAP domain at one ``authorized`` directory; the thread counts
and logs what it refuses (public keys only, never a secret), and stops at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import threading
from pathlib import Path
from typing import Any

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from arena.bus.keys import SecurityError, unreadable_public_key


def admit_from(context: zmq.Context, authorized: Path) -> str:
    """The ZAP domain that admits exactly the public keys in ``authorized``, served by the
    authenticator of ``context`` (started here if need be).

    Each authorized directory gets its own domain, so sockets of one process that admit
    different key sets do not share a list. The certificates are re-read on every call: a key
    added to the directory is admitted by the next socket made.
    """
    domain = _domain(authorized)
    authenticator = _authenticator(context)
    authenticator.configure_curve(domain=domain, location=str(authorized))
    if domain not in authenticator.certs:  # pyzmq logs a load failure instead of raising
        bad = unreadable_public_key(authorized)
        raise SecurityError(
            f"cannot load the public keys in {authorized}{f': {bad}' if bad else ''}"
        )
    return domain


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
