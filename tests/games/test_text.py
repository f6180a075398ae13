"""The characters and text spaces of games (games/text.py)."""

from __future__ import annotations

from games.text import CHARSET, normalize, text_space, to_charset


def test_text_helpers() -> None:
    assert normalize("  Take 2\tfrom  HEAP 1\n") == "take 2 from heap 1"
    assert to_charset("caf\u00e9 \u2713") == "caf? ?"
    assert to_charset("abcdef", max_length=3) == "def"
    assert set(to_charset("".join(map(chr, range(300))))) <= CHARSET


def test_the_text_space_admits_spaces_and_the_empty_string() -> None:
    space = text_space(5)
    assert space.contains("") and space.contains("a b c")
    assert not space.contains("abcdef") and not space.contains("caf\u00e9")
