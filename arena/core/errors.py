"""Errors shared by every layer, and the one "did you mean" of Arena.

Every lookup that can fail on a user's typo (a config key, a registered id, a request field, a
backend name) names the nearest valid choice through :func:`did_you_mean`, so the hint reads
the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_REFUSED = 2
"""Exit status of an ``arena`` command that refused its command line, its config or its
environment (:class:`ConfigError`, :class:`CannotStart`). Started again unchanged it would fail
the same way, so a launcher does not restart it."""


class ConfigError(ValueError):
    """A config that cannot run; the message names the key and what would be valid."""


class CannotStart(RuntimeError):
    """A process that cannot do its job on this machine as it is (e.g. no disk space for its
    checkpoints); the message says what is missing and what to change."""


def nearest(word: str, choices: Iterable[str], n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` choices that look like ``word`` (similarity at least ``cutoff``), closest first."""
    return difflib.get_close_matches(str(word), list(choices), n=n, cutoff=cutoff)


def did_you_mean(
    word: str, choices: Iterable[str], n: int = 1, cutoff: float = 0.6, prefix: str = ""
) -> str:
    """``"; did you mean 'x'?"`` for the nearest choices, or ``""`` when none is near. ``prefix``
    is prepended to each suggestion (``learner.optim.`` for a nested config key)."""
    close = nearest(word, choices, n, cutoff)
    return f"; did you mean {', '.join(repr(prefix + c) for c in close)}?" if close else ""


def check_choice(where: str, value: str, choices: Iterable[str]) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ConfigError(
            f"{where} = {value!r} is not one of {choices}{did_you_mean(value, choices)}"
        )
