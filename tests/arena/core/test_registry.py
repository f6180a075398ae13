"""The one registry of Arena (``arena.core.registry``): ids, laziness, errors and plugins.

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_registry.py``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from arena.core.registry import PluginFailed, Registry, RegistryError, load_object, parse_id


class Thing:
    def __init__(self, size: int = 1, colour: str = "red") -> None:
        self.size, self.colour = size, colour


def write_module(root: Path, name: str, body: str = "") -> None:
    (root / f"{name}.py").write_text(textwrap.dedent(body) or "class Thing:\n    pass\n")


# -- ids ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        "tictactoe",
        "tictactoe-v",
        "tictactoe-vx",
        "tictactoe_v0",
        "-v0",
        "tic tac toe-v0",
        "tictactoe-v0 ",
        "",
        "TicTacToe-V0",
    ],
)
def test_malformed_versioned_ids_are_refused(bad: str) -> None:
    registry: Registry[Thing] = Registry("thing")
    with pytest.raises(RegistryError, match="must look like 'name-vN'"):
        registry.register(bad, Thing)
    assert bad not in registry


def test_parse_id() -> None:
    assert parse_id("connect-four-v12") == ("connect-four", 12)
    assert parse_id("openspiel-kuhn_poker-v0") == ("openspiel-kuhn_poker", 0)
    with pytest.raises(RegistryError):
        parse_id("connect-four")


def test_unversioned_registries_take_plain_names() -> None:
    registry: Registry[Thing] = Registry("backend", versioned=False)
    registry.register("hf", Thing)
    registry.register("check-game", Thing)
    registry.register("my_cmd.2", Thing)
    for bad in ("", "Bad Cmd", "-x", "a:b", "tab\t"):
        with pytest.raises(RegistryError, match="must be plain: letters, digits"):
            registry.register(bad, Thing)
    assert registry.ids() == ["check-game", "hf", "my_cmd.2"]
    with pytest.raises(RegistryError, match="did you mean 'hf'"):
        registry.make("hff")


# -- registering --------------------------------------------------------------------------------
def test_a_duplicate_is_refused_and_override_replaces() -> None:
    registry: Registry[Thing] = Registry("thing")
    registry.register("thing-v0", Thing, kwargs={"size": 2})
    with pytest.raises(RegistryError, match="'thing-v0' is already registered"):
        registry.register("thing-v0", Thing)
    assert registry.make("thing-v0").size == 2  # the refused registration changed nothing
    registry.register("thing-v0", Thing, kwargs={"size": 3}, override=True)
    assert registry.make("thing-v0").size == 3
    assert len(registry) == 1


def test_make_merges_registered_and_explicit_kwargs() -> None:
    registry: Registry[Thing] = Registry("thing")
    registry.register("thing-v0", Thing, kwargs={"size": 2, "colour": "blue"}, note="kept")
    thing = registry.make("thing-v0", colour="green")
    assert (thing.size, thing.colour) == (2, "green")
    entry = registry.entry("thing-v0")
    assert entry.metadata == {"note": "kept"} and entry.plugin is None
    assert entry.target == f"{__name__}:Thing"


def test_a_factory_must_be_callable_or_a_string() -> None:
    with pytest.raises(RegistryError, match="factory must be"):
        Registry("thing").register("thing-v0", 42)  # type: ignore[arg-type]


# -- laziness -----------------------------------------------------------------------------------
def test_a_factory_string_is_imported_only_when_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, "arena_lazy_thing")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "arena_lazy_thing", raising=False)
    registry: Registry[object] = Registry("thing")
    registry.register("lazy-v0", "arena_lazy_thing:Thing")
    assert registry.ids() == ["lazy-v0"] and "lazy-v0" in registry
    assert registry.entry("lazy-v0").target == "arena_lazy_thing:Thing"
    assert "arena_lazy_thing" not in sys.modules
    thing = registry.make("lazy-v0")
    assert "arena_lazy_thing" in sys.modules
    assert type(thing) is sys.modules["arena_lazy_thing"].Thing


def test_a_bad_factory_string_fails_only_when_made() -> None:
    registry: Registry[object] = Registry("thing")
    registry.register("gone-v0", "arena_no_such_module_xyz:Thing")
    registry.register("typo-v0", "arena.core.registry:Nope")
    with pytest.raises(ModuleNotFoundError, match="arena_no_such_module_xyz"):
        registry.make("gone-v0")
    with pytest.raises(AttributeError, match="Nope"):
        registry.make("typo-v0")


def boom(**kwargs: object) -> object:
    raise RuntimeError("no licence server\nsecond line")


def test_a_plugin_that_fails_to_build_is_one_line_naming_it() -> None:
    registry: Registry[object] = Registry("bot")
    registry.register("boom-v0", boom, plugin="acme-bots")
    registry.register("gone-v0", "arena_no_such_module_xyz:Bot", plugin="acme-bots")
    registry.register("picky-v0", Thing, plugin="acme-bots")
    with pytest.raises(PluginFailed) as failed:
        registry.make("boom-v0")
    assert str(failed.value) == (
        f"bot 'boom-v0' ({__name__}:boom, plugin acme-bots): failed to build: "
        "RuntimeError: no licence server"
    )
    assert isinstance(failed.value, RegistryError)  # commands print it in one line, exit 2
    with pytest.raises(PluginFailed, match="ModuleNotFoundError: No module named 'arena_no_such"):
        registry.make("gone-v0")
    with pytest.raises(TypeError):  # an argument refused stays a TypeError, for callers to name
        registry.make("picky-v0", bogus=1)
    # Arena's own factories raise as they are: a bug, with its traceback
    registry.register("own-v0", boom)
    with pytest.raises(RuntimeError):
        registry.make("own-v0")


def test_load_object_takes_an_attribute_path() -> None:
    assert load_object("arena.core.registry:Registry.make") is Registry.make
    for bad in ("", ":Registry", "arena.core.registry:", "arena.core.registry", "not a module:x"):
        with pytest.raises(RegistryError, match="expected 'module:attribute'"):
            load_object(bad)


# -- unknown ids --------------------------------------------------------------------------------
def test_an_unknown_id_names_the_nearest_ones_quoted() -> None:
    registry: Registry[Thing] = Registry("game")
    for name in ("tictactoe-v0", "connect-four-v0", "nim-v0"):
        registry.register(name, Thing)
    with pytest.raises(RegistryError) as caught:
        registry.make("tictactoe-v1")
    message = str(caught.value)
    assert message.startswith("unknown game 'tictactoe-v1'; did you mean 'tictactoe-v0'?")
    assert "(registered: connect-four-v0, nim-v0, tictactoe-v0)" in message
    with pytest.raises(RegistryError) as caught:
        registry.entry("zzzzzz-v0")
    assert "did you mean" not in str(caught.value)


# -- entry points -------------------------------------------------------------------------------
GROUP = "arena.test_registry_things"


def install_distribution(root: Path, entry_points: str, name: str = "arena_thing_plugin") -> None:
    """A real installed distribution under ``root``: a module and its ``.dist-info``."""
    write_module(
        root,
        name,
        """
        class Thing:
            def __init__(self, size=1):
                self.size = size
    """,
    )
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_plugins_register_from_their_entry_point_group_on_first_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path,
        f"""
        [{GROUP}]
        thing-v0 = arena_thing_plugin:Thing
        native-v0 = arena_thing_plugin:Thing
        Not_Versioned = arena_thing_plugin:Thing

        [some.other.group]
        other-v0 = arena_thing_plugin:Thing
    """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "arena_thing_plugin", raising=False)
    registry: Registry[object] = Registry("thing", entry_point_group=GROUP)
    registry.register("native-v0", Thing)  # registered in code before the group is read
    assert registry.ids() == ["native-v0", "thing-v0"]
    assert "arena_thing_plugin" not in sys.modules  # listing imports no plugin
    entry = registry.entry("thing-v0")
    assert (entry.target, entry.plugin) == ("arena_thing_plugin:Thing", "arena_thing_plugin")
    assert registry.make("thing-v0", size=5).size == 5
    # the plugin's claim on an id taken in code is refused, and the code's entry stays
    assert registry.entry("native-v0").factory is Thing
    assert set(registry.rejected) == {"native-v0", "Not_Versioned"}
    taken = registry.rejected["native-v0"]
    assert (taken.target, taken.plugin) == ("arena_thing_plugin:Thing", "arena_thing_plugin")
    assert "already registered by Arena" in taken.reason
    assert "must look like 'name-vN'" in registry.rejected["Not_Versioned"].reason
    with pytest.raises(RegistryError, match="from arena_thing_plugin was not registered: id "):
        registry.make("Not_Versioned")


def test_using_an_id_a_plugin_claimed_says_once_that_the_plugins_entry_was_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the author of a plugin that reuses a built-in's id would otherwise check, train and
    # evaluate the built-in, thinking it theirs
    install_distribution(tmp_path, f"[{GROUP}]\nnative-v0 = arena_thing_plugin:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry[object] = Registry("thing", entry_point_group=GROUP)
    registry.register("native-v0", Thing)
    registry.entry("native-v0")
    registry.make("native-v0")
    assert capsys.readouterr().err == (
        f"arena: note: thing 'native-v0' is Arena's ({__name__}:Thing); arena_thing_plugin's "
        "entry point native-v0 = 'arena_thing_plugin:Thing' was refused: thing 'native-v0' is "
        "already registered by Arena\n"
    )


def test_a_registry_without_a_group_reads_no_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(tmp_path, f"[{GROUP}]\nthing-v0 = arena_thing_plugin:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert Registry("thing").ids() == []
    assert Registry("thing", entry_point_group=GROUP).ids() == ["thing-v0"]


def test_a_plugin_that_cannot_be_imported_fails_in_one_line_when_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path,
        f"""
        [{GROUP}]
        thing-v0 = arena_thing_plugin:Thing
        raises-v0 = arena_thing_raises:Thing
        typo-v0 = arena_thing_plugin:Thnig
    """,
    )
    (tmp_path / "arena_thing_raises.py").write_text("raise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("arena_thing_plugin", "arena_thing_raises"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    registry: Registry[object] = Registry("thing", entry_point_group=GROUP)
    assert registry.ids() == ["raises-v0", "thing-v0", "typo-v0"]  # listed, nothing imported
    with pytest.raises(RegistryError) as caught:
        registry.make("raises-v0")
    assert str(caught.value) == (
        "thing 'raises-v0' (arena_thing_raises:Thing, plugin arena_thing_plugin): "
        "cannot import it: RuntimeError: broken on purpose"
    )
    with pytest.raises(RegistryError, match=r"'typo-v0' \(arena_thing_plugin:Thnig, plugin a"):
        registry.load("typo-v0")
    assert registry.make("thing-v0", size=3).size == 3  # the others still work


class Base:
    pass


class Good(Base):
    pass


def test_a_plugin_class_that_is_not_the_registrys_base_fails_in_one_line() -> None:
    registry: Registry[object] = Registry("bot", base=f"{__name__}:Base")  # imported when checked
    registry.register("good-v0", Good, plugin="acme-bots")
    registry.register("stray-v0", Thing, plugin="acme-bots")
    registry.register("made-v0", boom, plugin="acme-bots")  # a function: not checked
    registry.register("own-v0", Thing)  # Arena's own: not checked
    assert type(registry.make("good-v0")) is Good
    with pytest.raises(PluginFailed) as failed:
        registry.make("stray-v0")
    assert str(failed.value) == (
        f"bot 'stray-v0' ({__name__}:Thing, plugin acme-bots): Thing is not a {__name__}.Base"
    )
    assert registry.not_a_subclass(Good) is None and registry.not_a_subclass(boom) is None
    assert type(registry.make("own-v0")) is Thing
