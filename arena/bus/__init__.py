"""The actor bus: ZeroMQ transport, msgpack headers, numpy arrays as raw frames.

It knows nothing of games, models or training; it moves messages.
"""

from arena.bus.actor import Actor
from arena.bus.blocking import BlockingActor
from arena.bus.broker import Broker
from arena.bus.codec import Blob, Message, decode, encode
from arena.bus.errors import BusError, BusTimeout, ProtocolError

__all__ = [
    "Actor",
    "BlockingActor",
    "Blob",
    "Broker",
    "BusError",
    "BusTimeout",
    "Message",
    "ProtocolError",
    "decode",
    "encode",
]
