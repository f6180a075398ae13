"""Errors shared by every layer, and the one "did you mean" of Arena.

Every lookup that can fail on a user's typo (a config key, a registered id, a request field, a
backend name) names the nearest valid choice through :func:`did_you_mean`, so the hint reads
the same everywhere.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any

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


def keyword_hint(err: BaseException, factory: Callable[..., Any]) -> str:
    """``"; did you mean 'max_retries'?"`` when ``err`` is the ``TypeError`` of a keyword
    argument ``factory`` does not take (``max_retriez``): the nearest keyword it does take (its
    class's ``__init__`` and, through ``**kwargs``, its bases'), else every one of them
    (``" (it takes: max_idle, latency)"``); ``""`` for any other error."""
    found = re.search(r"unexpected keyword argument '(\w+)'", str(err))
    if not found:
        return ""
    keywords = _keywords(factory)
    near = did_you_mean(found.group(1), keywords)
    return near or (f" (it takes: {', '.join(keywords)})" if keywords else " (it takes none)")


def _keywords(factory: Callable[..., Any]) -> list[str]:
    names: list[str] = []
    inits = [c.__init__ for c in factory.__mro__] if inspect.isclass(factory) else [factory]
    for at, init in enumerate(inits):
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            break
        names += [
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            # a base's arguments without a default are the subclass's to pass, not the user's
            and (at == 0 or p.default is not p.empty)
        ]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break  # the rest of the MRO never sees a keyword this one does not name
    return [n for n in dict.fromkeys(names) if n != "self"]
