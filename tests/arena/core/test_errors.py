"""The one "did you mean" (arena/core/errors.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_errors.py``.
"""

from __future__ import annotations

import pytest

from arena.core.errors import ConfigError, check_choice, did_you_mean, nearest


def test_did_you_mean_quotes_the_nearest_choices() -> None:
    assert did_you_mean("asynch", ["sync", "async"]) == "; did you mean 'async'?"
    assert did_you_mean("zzz", ["sync", "async"]) == ""
    assert nearest("nim-v1", ["nim-v0", "tictactoe-v0"], n=3, cutoff=0.5) == ["nim-v0"]


def test_check_choice_raises_a_config_error_with_the_hint() -> None:
    check_choice("mode", "sync", ["sync", "async"])
    with pytest.raises(
        ConfigError,
        match=r"mode = 'asynch' is not one of \['sync', 'async'\]; did you mean 'async'\?",
    ):
        check_choice("mode", "asynch", ["sync", "async"])
    assert issubclass(ConfigError, ValueError)
