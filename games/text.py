"""The characters and text spaces every game speaks in, and the tolerance its parsers grant.

Observation and action text is printable ASCII (:data:`CHARSET`): what a tokenizer round-trips
and a terminal shows. :func:`to_charset` makes any text fit, and :func:`normalize` is the
case and whitespace folding that every ``parse_action`` applies before it compares names.
"""

from __future__ import annotations

import string

from gymnasium import spaces

CHARSET = frozenset(string.printable)
"""Characters allowed in observation and action text (gymnasium's default rejects spaces)."""

TEXT_MAX_LENGTH = 8192


def text_space(max_length: int = TEXT_MAX_LENGTH) -> spaces.Text:
    """A ``Text`` space over :data:`CHARSET` that also admits the empty string."""
    return spaces.Text(max_length, min_length=0, charset=CHARSET)


def to_charset(text: str, max_length: int = TEXT_MAX_LENGTH) -> str:
    """Replace characters outside :data:`CHARSET` with ``?``; keep the most recent tail."""
    clean = "".join(ch if ch in CHARSET else "?" for ch in text)
    return clean[-max_length:]


def normalize(text: str) -> str:
    """Case-fold and collapse whitespace: the tolerance every ``parse_action`` grants."""
    return " ".join(text.split()).casefold()
