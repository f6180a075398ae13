"""TensorBoard scalars of a run, written without torch: :func:`scalar_writer`.

``torch.utils.tensorboard`` wraps tensorboard's own event-file writer, and importing it imports
torch, 3 s of CPU for a run's own process, which otherwise holds no model. For scalars the
wrapper adds nothing: an ``Event`` with a ``Summary`` of one ``simple_value`` per tag, written
by tensorboard's ``EventFileWriter`` into ``events.out.tfevents.*`` files that TensorBoard reads.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


class ScalarWriter:
    """Scalars by tag and step into one event file of ``directory``."""

    def __init__(self, directory: Path) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event, self._summary = Event, Summary
        self._writer = EventFileWriter(str(directory))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        summary = self._summary(value=[self._summary.Value(tag=tag, simple_value=float(value))])
        self._writer.add_event(self._event(wall_time=time.time(), step=step, summary=summary))

    def close(self) -> None:
        self._writer.close()


def scalar_writer(directory: Path) -> Any:
    """A :class:`ScalarWriter` for ``directory``, or None where tensorboard is not installed
    (the ``watch`` extra)."""
    try:
        return ScalarWriter(directory)
    except ImportError:
        return None
