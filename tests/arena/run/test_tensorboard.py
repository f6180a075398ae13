"""A run's TensorBoard scalars, written without torch, read back by TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from arena.run.tensorboard import scalar_writer  # noqa: E402
from tests.cli import python_probe


def test_scalars_read_back_by_tag_and_step(tmp_path: Path) -> None:
    writer = scalar_writer(tmp_path)
    writer.add_scalar("reward/kuhn-poker-v0/player", 0.25, 1)
    writer.add_scalar("reward/kuhn-poker-v0/player", -0.5, 2)
    writer.add_scalar("learner/loss", 3, 2)  # an int is written as a float
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["learner/loss", "reward/kuhn-poker-v0/player"]
    reward = [(e.step, e.value) for e in events.Scalars("reward/kuhn-poker-v0/player")]
    assert reward == [(1, 0.25), (2, -0.5)]
    assert [(e.step, e.value) for e in events.Scalars("learner/loss")] == [(2, 3.0)]


def test_the_writer_imports_no_torch(tmp_path: Path) -> None:
    probe = (
        "import sys\nfrom pathlib import Path\nfrom arena.run.tensorboard import scalar_writer\n"
        f"w = scalar_writer(Path({str(tmp_path)!r})); w.add_scalar('a', 1.0, 1); w.close()\n"
        "print('torch' in sys.modules)\n"
    )
    assert python_probe(probe) == "False"
