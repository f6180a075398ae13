"""The one config loader and the flags derived from config dataclasses (arena/core/config.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_config.py``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from arena.core.config import (
    add_arguments,
    field_docs,
    from_arguments,
    from_dict,
    load_config,
    parse_assignments,
    to_arguments,
)
from arena.core.errors import ConfigError


@dataclass
class Inner:
    rate: float = 0.5
    """How fast."""


@dataclass
class Outer:
    name: str = "x"
    """The name,
    over two lines."""
    count: int = 3
    """How many."""
    verbose: bool = False
    """Say more."""
    limit: int | None = None
    """An optional cap."""
    inner: Inner = field(default_factory=Inner)
    tags: list[str] = field(default_factory=list)


@dataclass
class Child(Outer):
    extra: float = 1.0
    """Only the child has it."""


def test_yaml_then_overrides_with_extends(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("count: 7\ninner:\n  rate: 0.25\n")
    (tmp_path / "run.yaml").write_text("extends: base.yaml\nname: run\n")
    config = load_config(Outer, tmp_path / "run.yaml", ["inner.rate=0.75", "tags=[a,b]"])
    assert (config.name, config.count, config.inner.rate, config.tags) == (
        "run",
        7,
        0.75,
        ["a", "b"],
    )


def test_the_defaults_built_once_are_never_changed_by_a_load(tmp_path: Path) -> None:
    """The schema's defaults are built once per process; every load changes its own copy."""
    (tmp_path / "run.yaml").write_text("count: 7\ninner:\n  rate: 0.25\n")
    changed = load_config(Outer, tmp_path / "run.yaml", ["tags=[a]", "inner.rate=0.75"])
    assert (changed.count, changed.inner.rate, changed.tags) == (7, 0.75, ["a"])
    assert load_config(Outer, None, ["name=y"]).name == "y"
    assert load_config(Outer, None) == Outer()


def test_unknown_keys_name_the_nearest_valid_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'inner.rat'; did you mean 'inner.rate'"):
        load_config(Outer, None, ["inner.rat=1"])
    with pytest.raises(ConfigError, match="did you mean 'count'"):
        from_dict(Outer, {"cuont": 1})
    with pytest.raises(ConfigError, match="must look like key=value"):
        load_config(Outer, None, ["count"])
    with pytest.raises(ConfigError, match="does not exist$"):
        load_config(Outer, tmp_path / "missing.yaml")
    (tmp_path / "smoke.yaml").write_text("count: 2\n")  # a typo of a file beside it: named
    with pytest.raises(ConfigError) as err:
        load_config(Outer, tmp_path / "smokee.yaml")
    assert str(err.value) == (
        f"config file {tmp_path / 'smokee.yaml'} does not exist; did you mean "
        f"'{tmp_path / 'smoke.yaml'}'?"
    )
    with pytest.raises(ConfigError, match="count"):
        from_dict(Outer, {"count": "many"})


def test_field_docs_read_the_docstring_under_each_field_including_inherited() -> None:
    docs = field_docs(Child)
    assert docs["name"] == "The name, over two lines."
    assert docs["extra"] == "Only the child has it."
    assert "inner" not in docs  # no docstring under it


def test_flags_are_derived_from_the_fields_with_their_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, Child, exclude=("count",))
    flags = {a.dest: a for a in parser._actions}
    assert (
        "count" not in flags and "inner" not in flags and "tags" not in flags
    )  # excluded, structured
    assert flags["limit"].default is None and flags["extra"].default == 1.0
    assert "Only the child has it. (default: 1.0)" in flags["extra"].help
    args = parser.parse_args(["--name", "n", "--verbose", "--limit", "4", "--extra", "2.5"])
    config = from_arguments(Child, args, count=9)
    assert (config.name, config.verbose, config.limit, config.extra, config.count) == (
        "n",
        True,
        4,
        2.5,
        9,
    )
    assert from_arguments(Child, parser.parse_args(["--no-verbose"])).verbose is False


def test_parse_assignments_reads_literals_and_keeps_text() -> None:
    assert parse_assignments(["a=1", "b=x y", "c=[1, 2]", "d='q'", "e=1e-3"]) == {
        "a": 1,
        "b": "x y",
        "c": [1, 2],
        "d": "q",
        "e": 0.001,
    }
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_assignments(["novalue"])


def test_to_arguments_is_what_add_arguments_parses_back() -> None:
    config = Child(name="n", count=9, verbose=True, limit=None, extra=2.5)
    argv = to_arguments(config, exclude=("count",))
    assert argv == ["--name", "n", "--verbose", "--extra", "2.5"]  # None and excluded left out
    parser = argparse.ArgumentParser()
    add_arguments(parser, Child, exclude=("count",))
    assert from_arguments(Child, parser.parse_args(argv), count=9) == config
    assert "--no-verbose" in to_arguments(Child(verbose=False))


@dataclass
class Sim:
    id: str = "scripted-user-v0"
    kwargs: dict = field(default_factory=dict)


@dataclass
class Item:
    id: str = "g"
    simulators: dict[str, Sim] = field(default_factory=dict)


@dataclass
class WithList:
    games: list[Item] = field(default_factory=lambda: [Item()])


def test_a_list_items_error_names_its_place_and_the_fix(tmp_path: Path) -> None:
    """omegaconf names a list item's keys from the item (``simulators.user``): the message
    names them from the config's root, in the override syntax, with the fix."""
    run = tmp_path / "run.yaml"
    run.write_text("games:\n  - id: a\n  - id: b\n    simulators: {user: llm-user-v0}\n")
    with pytest.raises(ConfigError) as err:
        load_config(WithList, run)
    assert str(err.value) == (
        f"{run}: games.1.simulators.user: a Sim is a mapping, not the str 'llm-user-v0': "
        "write user: {id: llm-user-v0}"
    )
    # the command line names it the same way (omegaconf wrote games[1] there)
    with pytest.raises(ConfigError) as err:
        load_config(WithList, None, ["games.0.simulators.user=x-v0"])
    assert str(err.value) == (
        "command line: games.0.simulators.user: a Sim is a mapping, not the str 'x-v0': "
        "write user: {id: x-v0}"
    )
    # a misspelled key inside a list item: its place, the nearest key and the item's fields
    run.write_text("games:\n  - id: a\n    simulators: {user: {id: u, kwarg: {}}}\n")
    with pytest.raises(ConfigError) as err:
        load_config(WithList, run)
    assert str(err.value) == (
        f"{run}: unknown key 'games.0.simulators.user.kwarg'; did you mean "
        "'games.0.simulators.user.kwargs'? (valid here: id, kwargs)"
    )
    run.write_text("games:\n  - id: a\n    simulatorz: {}\n")
    with pytest.raises(ConfigError, match=r"'games.0.simulatorz'; did you mean 'games.0.simul"):
        load_config(WithList, run)
    # a bare string for a list item: omegaconf names that item itself
    run.write_text("games: [a]\n")
    with pytest.raises(ConfigError, match=r"games.0: a Item is a mapping, not the str 'a': write"):
        load_config(WithList, run)
