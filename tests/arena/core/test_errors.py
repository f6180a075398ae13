"""The one "did you mean" (arena/core/errors.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_errors.py``.
"""

from __future__ import annotations

import pytest

from arena.core.errors import ConfigError, check_choice, did_you_mean, keyword_hint, nearest


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


def test_keyword_hint_names_the_nearest_keyword_of_the_class_and_its_bases() -> None:
    class Base:
        def __init__(self, size: int, *, max_retries: int = 2, render_mode: str = "") -> None:
            pass

    class Game(Base):
        def __init__(self, depth: int = 1, **kwargs: object) -> None:
            super().__init__(3, **kwargs)

    def refusal(**kwargs: object) -> TypeError:
        with pytest.raises(TypeError) as err:
            Game(**kwargs)
        return err.value

    # through **kwargs the base's keywords count; its `size`, which Game passes, does not
    assert keyword_hint(refusal(max_retriez=1), Game) == "; did you mean 'max_retries'?"
    assert keyword_hint(refusal(bogus=1), Game) == " (it takes: depth, max_retries, render_mode)"
    assert keyword_hint(ValueError("max_retries must be >= 0"), Game) == ""
