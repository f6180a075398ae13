"""Shared fixtures: the tiny model from arena.models (built in code, no downloads)."""

from __future__ import annotations

import logging

import pytest

from arena.models import tiny_model


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the tiny Llama; treat as read-only (copy before training)."""
    return tiny_model(seed=0)


@pytest.fixture
def fresh_tiny():
    """A tiny model of one's own, to train."""
    return tiny_model(seed=0)


@pytest.fixture(autouse=True)
def _learner_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="arena.learner")
