"""Loading a model directory (arena/models/loading.py) keeps transformers' progress bars out of
the console: a run loads a checkpoint for every strategy read.

Run with ``.venv/bin/python -m pytest -q tests/arena/models/test_loading.py``.
"""

from __future__ import annotations

import pytest
from transformers.utils import logging as hf_logging

from arena.models.loading import load_model
from arena.models.tiny import tiny_dir


def test_loading_a_model_directory_prints_no_progress_bar(
    capfd: pytest.CaptureFixture[str],
) -> None:
    directory = tiny_dir()  # an HF directory, loaded as a checkpoint's model/ is
    capfd.readouterr()
    shown = hf_logging.is_progress_bar_enabled()
    model, _ = load_model(str(directory))
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err
    assert model.num_parameters() > 0
    assert hf_logging.is_progress_bar_enabled() == shown  # the setting is left as it was
