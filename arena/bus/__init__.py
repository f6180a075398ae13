"""The actor bus: ZeroMQ transport, msgpack headers, numpy arrays as raw frames.

It knows nothing of games, models or training; it moves messages.
"""

from arena.bus.actor import Actor
from arena.bus.blocking import BlockingActor
from arena.bus.broker import Broker
from arena.bus.codec import Blob, Message, ProtocolError, decode, encode
from arena.bus.errors import BusError, BusTimeout

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
