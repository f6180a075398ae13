"""The one registry pattern of Arena: versioned ids mapped to lazy ``"module:Factory"`` strings.

Games, roles and simulators each keep one :class:`Registry`. An entry is registered by id
(``"tictactoe-v0"``) with a factory given either as a callable or as a lazy string
``"games.tictactoe:TicTacToe"``; the module is imported only when the entry is first made.
Third-party packages add entries through a Python entry-point group (``arena.games``,
``arena.roles``, ``arena.simulators``); each entry point's name is the id and its value the
``module:Factory`` string.

It lives in ``games/`` because games are the bottom layer: roles and simulators may import games,
but games import nothing of Arena's.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_ID = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+?)-v(?P<version>\d+)$")


class RegistryError(LookupError):
    """An id that is malformed, unknown or registered twice."""


@dataclass
class Entry(Generic[T]):
    """One registered id: its factory (callable or lazy ``module:Factory``) and default kwargs."""

    id: str
    factory: str | Callable[..., T]
    kwargs: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., T]:
        """Resolve the factory, importing its module on first use."""
        if callable(self.factory):
            return self.factory
        return load_object(self.factory)


def load_object(spec: str) -> Any:
    """Import ``"package.module:Attr.sub"`` and return the attribute."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise RegistryError(f"expected 'module:attribute', got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def parse_id(entry_id: str) -> tuple[str, int]:
    """Split ``"name-vN"`` into ``("name", N)``; raise on anything else."""
    match = _ID.match(entry_id)
    if match is None:
        raise RegistryError(f"id {entry_id!r} must look like 'name-vN', e.g. 'tictactoe-v0'")
    return match["name"], int(match["version"])


class Registry(Generic[T]):
    """Versioned ids to factories, with plugins loaded from an entry-point group on first lookup."""

    def __init__(self, kind: str, entry_point_group: str | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._entries: dict[str, Entry[T]] = {}
        self._plugins_loaded = entry_point_group is None

    def register(
        self,
        entry_id: str,
        factory: str | Callable[..., T],
        *,
        override: bool = False,
        kwargs: dict[str, Any] | None = None,
        **metadata: Any,
    ) -> None:
        """Add ``entry_id``; ``kwargs`` are defaults passed to the factory by :meth:`make`."""
        parse_id(entry_id)
        if entry_id in self._entries and not override:
            raise RegistryError(f"{self.kind} {entry_id!r} is already registered")
        self._entries[entry_id] = Entry(entry_id, factory, dict(kwargs or {}), metadata)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=self.entry_point_group):
            if ep.name not in self._entries:
                self.register(ep.name, ep.value, plugin=ep.dist.name if ep.dist else None)

    def spec(self, entry_id: str) -> Entry[T]:
        """The entry for ``entry_id``, or an error that names the nearest registered ids."""
        self._load_plugins()
        try:
            return self._entries[entry_id]
        except KeyError:
            close = difflib.get_close_matches(entry_id, self._entries, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            known = ", ".join(sorted(self._entries)) or "none"
            raise RegistryError(
                f"unknown {self.kind} {entry_id!r}{hint} (registered: {known})"
            ) from None

    def make(self, entry_id: str, **kwargs: Any) -> T:
        """Build ``entry_id``; explicit kwargs override the registered defaults."""
        entry = self.spec(entry_id)
        return entry.load()(**{**entry.kwargs, **kwargs})

    def ids(self) -> list[str]:
        """Every registered id, sorted."""
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
