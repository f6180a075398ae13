"""The errors of the bus: what a bus call raises, and what an inbound message that breaks the
protocol raises."""

from __future__ import annotations


class BusError(RuntimeError):
    """A request that failed: the remote side, the broker, or the bus itself said no.

    ``code`` names the kind: e.g. ``timeout``, ``actor_dead``, ``broker_lost``, ``unreachable``,
    ``unknown_service``, ``handler_error``, ``closed``, ``busy``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class BusTimeout(BusError, TimeoutError):
    """No reply arrived within the request's timeout."""


class ProtocolError(Exception):
    """An inbound message that breaks the protocol. ``code`` names the kind of fault."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
