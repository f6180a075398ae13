"""The one registry pattern of Arena: ids mapped to lazy ``"module:Factory"`` strings.

Games, bots, roles, simulators, policy backends and ``arena`` subcommands each keep one
:class:`Registry`::

    registry = Registry("game", entry_point_group="arena.games")
    registry.register("tictactoe-v0", "games.tictactoe:TicTacToe")
    env = registry.make("tictactoe-v0", max_retries=0)

- **Lazy.** A factory is a callable or a string ``"package.module:Factory"`` (a bare
  ``"package.module"`` names the module itself); the module is imported only when the entry is
  first loaded (:meth:`Entry.load`, :meth:`Registry.make`), so listing ids imports nothing.
- **Versioned ids.** Ids are ``name-vN`` (``tictactoe-v0``) wherever behaviour may change between
  versions (games, bots, roles, simulators); a registry of plain names (backends, commands) says
  ``versioned=False``: letters, digits, ``-``, ``_`` and ``.``, starting with a letter or digit
  (``check-game``), so a name can be typed on a command line. A malformed id is refused when
  registered.
- **No silent replacement.** Registering an id twice raises :class:`RegistryError` unless
  ``override=True``.
- **Did you mean.** An unknown id raises :class:`RegistryError` with the project-wide hint
  ``; did you mean 'x'?`` (:func:`arena.core.errors.did_you_mean`).
- **Plugins.** Third-party packages add entries through a Python entry-point group
  (``arena.games``, ``arena.bots``, ``arena.roles``, ``arena.simulators``, ``arena.policies``,
  ``arena.commands``): the entry point's name is the id, its value the ``module:Factory`` string.
  The group is read on the first lookup. An entry point that cannot be registered (a malformed
  id, an id already taken) never breaks the registry: it is skipped and kept in
  :attr:`Registry.rejected` with the reason, and looking its id up raises with that reason; where
  the id is taken (by a built-in), loading it (:meth:`Registry.load`, :meth:`Registry.make`)
  says once on stderr whose it is and that the plugin's entry point was refused.
  A plugin's factory that fails when used raises :class:`PluginFailed`, one line naming the id,
  its ``module:Factory``, its plugin and the exception, which commands print as it is: its
  module does not import (:meth:`Registry.load`: ``cannot import it: ...``), or building it
  raises anything but the ``TypeError``/``ValueError`` that refuse an argument
  (:meth:`Registry.make`, :meth:`Registry.building`: ``failed to build: ...``).

This module is stdlib only, so every layer may import it, games included.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from arena.core.errors import did_you_mean

T = TypeVar("T")

_ID = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+?)-v(?P<version>\d+)$")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class RegistryError(LookupError):
    """An id that is malformed, unknown or registered twice, or a factory string that is not
    ``module:attribute``."""


class PluginFailed(RegistryError):
    """A plugin's factory failed to import or to build (see the module docstring)."""


@dataclass
class Entry(Generic[T]):
    """One registered id: its factory (callable or lazy ``module:Factory``) and default kwargs."""

    id: str
    factory: str | Callable[..., T]
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Defaults passed to the factory by :meth:`Registry.make` (explicit kwargs win)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form facts registered with the entry (a command's ``help``, a game's ``seats``);
    each registry's owner says which keys it reads."""
    plugin: str | None = None
    """The distribution whose entry point registered this id; None when registered in code."""

    @property
    def target(self) -> str:
        """The factory as text: its ``module:Factory`` string, or the callable's import path."""
        if isinstance(self.factory, str):
            return self.factory
        module = getattr(self.factory, "__module__", None) or "?"
        return f"{module}:{getattr(self.factory, '__qualname__', repr(self.factory))}"

    def load(self) -> Callable[..., T]:
        """Resolve the factory, importing its module on first use (import errors propagate)."""
        if callable(self.factory):
            return self.factory
        return load_object(self.factory)


@dataclass(frozen=True)
class Rejected:
    """A plugin's entry point that could not be registered, and why."""

    id: str
    """The entry point's name (the id it asked for)."""
    target: str
    """The entry point's value (its ``module:Factory``)."""
    plugin: str | None
    """The distribution that declared it."""
    reason: str


def load_object(spec: str) -> Any:
    """Import ``"package.module:Attr.sub"`` and return the attribute."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not attr or not all(p.isidentifier() for p in module_name.split(".")):
        raise RegistryError(f"expected 'module:attribute', got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def parse_id(entry_id: str) -> tuple[str, int]:
    """Split ``"name-vN"`` into ``("name", N)``; raise on anything else."""
    match = _ID.match(entry_id) if isinstance(entry_id, str) else None
    if match is None:
        raise RegistryError(f"id {entry_id!r} must look like 'name-vN', e.g. 'tictactoe-v0'")
    return match["name"], int(match["version"])


class Registry(Generic[T]):
    """Ids to factories, with plugins loaded from an entry-point group on first lookup."""

    def __init__(
        self,
        kind: str,
        entry_point_group: str | None = None,
        *,
        versioned: bool = True,
        base: type | str | None = None,
    ) -> None:
        self.kind = kind
        """What an entry is, in words (``"game"``), for error messages."""
        self.base = base
        """The class a plugin's factory, when it is a class, must subclass (``roles.base.Role``
        for roles; a ``"module:Class"`` string is imported only when a plugin is checked): a
        plugin that is not one fails where it is loaded, naming the class it should be, not in
        the first episode with an ``AttributeError``."""
        self.entry_point_group = entry_point_group
        self.versioned = versioned
        self.rejected: dict[str, Rejected] = {}
        """Plugin entry points that could not be registered, by the id they asked for."""
        self._shadow_noted: set[str] = set()
        self._entries: dict[str, Entry[T]] = {}
        self._plugins_loaded = entry_point_group is None

    def register(
        self,
        entry_id: str,
        factory: str | Callable[..., T],
        *,
        override: bool = False,
        kwargs: dict[str, Any] | None = None,
        plugin: str | None = None,
        **metadata: Any,
    ) -> None:
        """Add ``entry_id``; ``kwargs`` are defaults passed to the factory by :meth:`make`,
        ``metadata`` is kept on the :class:`Entry`. ``override=True`` replaces an existing id."""
        if self.versioned:
            parse_id(entry_id)
        elif not isinstance(entry_id, str) or not _PLAIN.match(entry_id):
            raise RegistryError(
                f"{self.kind} name {entry_id!r} must be plain: letters, digits, '-', '_' and '.', "
                "starting with a letter or digit"
            )
        if not (callable(factory) or isinstance(factory, str)):
            raise RegistryError(
                f"{self.kind} {entry_id!r}: factory must be a callable or a 'module:Factory' "
                f"string, got {factory!r}"
            )
        if entry_id in self._entries and not override:
            raise RegistryError(
                f"{self.kind} {entry_id!r} is already registered "
                f"({self._entries[entry_id].target}); pass override=True to replace it"
            )
        self._entries[entry_id] = Entry(entry_id, factory, dict(kwargs or {}), metadata, plugin)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=self.entry_point_group):
            dist = ep.dist.name if ep.dist is not None else None
            try:
                if ep.name in self._entries:
                    owner = self._entries[ep.name].plugin or "Arena"
                    raise RegistryError(f"{self.kind} {ep.name!r} is already registered by {owner}")
                self.register(ep.name, ep.value, plugin=dist)
            except RegistryError as err:
                self.rejected[ep.name] = Rejected(ep.name, ep.value, dist, str(err))

    def entry(self, entry_id: str) -> Entry[T]:
        """The entry for ``entry_id``, or an error that names the nearest registered ids."""
        self._load_plugins()
        try:
            return self._entries[entry_id]
        except KeyError:
            pass
        if entry_id in self.rejected:
            bad = self.rejected[entry_id]
            raise RegistryError(
                f"{self.kind} {entry_id!r} = {bad.target!r} from {bad.plugin} "
                f"was not registered: {bad.reason}"
            )
        hint = did_you_mean(entry_id, self._entries, n=3, cutoff=0.5)
        known = ", ".join(sorted(self._entries)) or "none"
        raise RegistryError(f"unknown {self.kind} {entry_id!r}{hint} (registered: {known})")

    def _note_shadow(self, bad: Rejected) -> None:
        """Say once, on stderr, that ``bad.id`` is not the plugin's: a plugin that claims an id
        already taken (a built-in's) is refused, and without a word the command would use the
        other entry, so its author would check, train or evaluate the built-in thinking it
        theirs."""
        self._shadow_noted.add(bad.id)
        owner = self._entries[bad.id].plugin or "Arena"
        print(
            f"arena: note: {self.kind} {bad.id!r} is {owner}'s ({self._entries[bad.id].target}); "
            f"{bad.plugin}'s entry point {bad.id} = {bad.target!r} was refused: {bad.reason}",
            file=sys.stderr,
        )

    def load(self, entry_id: str) -> Callable[..., T]:
        """The factory of ``entry_id``, imported. A plugin's factory that cannot be imported (its
        module raises, or has no such attribute) raises :class:`PluginFailed` naming the id,
        its ``module:Factory``, its plugin and the error, the way ``arena plugins`` names it;
        an import error of Arena's own entries propagates as it is (a bug, with its traceback)."""
        entry = self.entry(entry_id)
        if entry_id in self.rejected and entry_id not in self._shadow_noted:
            self._note_shadow(self.rejected[entry_id])
        if entry.plugin is None:
            return entry.load()
        try:
            factory = entry.load()
        except Exception as err:  # whatever a plugin's module raises on import
            raise self._failed(entry, "cannot import it", err) from err
        wrong = self.not_a_subclass(factory)
        if wrong:
            raise PluginFailed(
                f"{self.kind} {entry.id!r} ({entry.target}, plugin {entry.plugin}): {wrong}"
            )
        return factory

    def not_a_subclass(self, factory: Any) -> str | None:
        """Why ``factory`` is not one of this registry's (``NotARole is not a
        roles.base.Role``), or None: a class that does not subclass :attr:`base`."""
        if self.base is None or not isinstance(factory, type):
            return None
        base = load_object(self.base) if isinstance(self.base, str) else self.base
        if issubclass(factory, base):
            return None
        return f"{factory.__name__} is not a {base.__module__}.{base.__qualname__}"

    def make(self, entry_id: str, **kwargs: Any) -> T:
        """Build ``entry_id``; explicit kwargs override the registered defaults. A plugin that
        fails to build raises :class:`PluginFailed`; Arena's own factories raise as they are
        (a bug to fix, with its traceback)."""
        entry = self.entry(entry_id)
        return self.building(entry_id, lambda: self.load(entry_id)(**{**entry.kwargs, **kwargs}))

    def building(self, entry_id: str, build: Callable[[], T]) -> T:
        """``build()``, which builds ``entry_id`` (:meth:`make`, or a backend's own
        ``from_config``); where that entry is a plugin's and ``build`` fails with anything but
        the ``TypeError``/``ValueError`` of a refused argument, :class:`PluginFailed`."""
        try:
            return build()
        except (TypeError, ValueError, RegistryError):  # a refused argument, or said already
            raise
        except Exception as err:
            entry = self._entries.get(entry_id)
            if entry is None or entry.plugin is None:
                raise
            raise self._failed(entry, "failed to build", err) from err

    def _failed(self, entry: Entry[T], what: str, err: Exception) -> PluginFailed:
        """One line: ``game 'x-v0' (pkg.mod:X, plugin pkg): failed to build: Error: first line``."""
        first = str(err).splitlines()[0] if str(err) else ""
        return PluginFailed(
            f"{self.kind} {entry.id!r} ({entry.target}, plugin {entry.plugin}): {what}: "
            f"{type(err).__name__}: {first}"
        )

    def ids(self) -> list[str]:
        """Every registered id, sorted (plugins included; nothing is imported)."""
        self._load_plugins()
        return sorted(self._entries)

    def __contains__(self, entry_id: object) -> bool:
        self._load_plugins()
        return entry_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def __len__(self) -> int:
        self._load_plugins()
        return len(self._entries)
