"""Run: .venv/bin/python -m pytest -q tests/trainers/test_config.py"""

from __future__ import annotations

import pytest

from trainers.config import LearnerConfig


def test_autocast_auto_is_accepted_and_a_typo_is_not() -> None:
    assert LearnerConfig(autocast="auto").autocast == "auto"
    with pytest.raises(ValueError, match="null, bfloat16 or auto"):
        LearnerConfig(autocast="bf16x")
