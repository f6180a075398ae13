"""What Arena knows about a registered game without building it: :class:`GameSpec`.

``games.spec("kuhn-poker-v0")`` answers with a frozen :class:`GameSpec` (the role Gymnasium's
``EnvSpec`` plays for ``gymnasium.spec``): its seats, kind, information, strongest reference bot,
turn limit and the library it needs. Where the facts come from:

- **Registered with the id.** ``registry.register(id, factory, seats=..., kind=...,
  information=..., ...)``: the adapter samples do this, so listing them needs neither their
  library nor a build. When the registration gives every required field the factory's module is
  not even imported.
- **The game class.** Otherwise the factory must be a :class:`games.TextGame` subclass, and the
  spec reads its class attribute ``metadata`` (registered fields win). Importing the module is
  the only cost; nothing is built.

:data:`REQUIRED` fields must come from one of the two, and every field is checked (a ``kind``
outside :data:`~games.text_env.KINDS`, seats that are not a ``(min, max)`` pair, ...). Anything
wrong raises :class:`GameSpecError`, whose message names the game, its ``module:Factory``, the
plugin that registered it, and what is wrong (``... is not a games.TextGame``, ``DemoGame.metadata
lacks 'seats'``, or the error its module raised on import). PettingZoo's own metadata keys
(``name``, ``render_modes``, ``is_parallelizable``) stay on the class; the spec ignores them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from arena.core.registry import Entry, RegistryError, parse_id
from games.text_env import INFORMATION, KINDS, TextGame

REQUIRED = ("seats", "kind", "information")
"""Fields every game must state, in its registration or its class's ``metadata``."""


class GameSpecError(RegistryError):
    """A registered game whose spec cannot be built: its module fails to import, its factory is
    not a :class:`games.TextGame`, or its metadata lacks or misstates a field."""

    def __init__(self, game_id: str, target: str, plugin: str | None, reason: str) -> None:
        self.game_id = game_id
        self.target = target
        self.plugin = plugin
        self.reason = reason
        origin = f"{target}, plugin {plugin}" if plugin else target
        super().__init__(f"game {game_id!r} ({origin}): {reason}")


@dataclass(frozen=True)
class GameSpec:
    """The typed facts about one registered game (see the module docstring for their source)."""

    id: str
    """The registered id, ``name-vN``."""
    entry_point: str
    """The factory as ``module:Factory`` (what ``games.make`` calls)."""
    seats: tuple[int, int]
    """``(min, max)`` number of players the game seats; ``(2, 2)`` for exactly two."""
    kind: str
    """How the seats' interests relate, one of :data:`~games.text_env.KINDS`: ``competitive``
    (one seat's gain is another's loss), ``cooperative`` (a shared score), ``general-sum``
    (mixed motives, e.g. negotiation or the prisoner's dilemma)."""
    information: str
    """One of :data:`~games.text_env.INFORMATION`: ``perfect`` (every seat sees the whole state)
    or ``hidden`` (seats hold private information, which the conformance kit checks stays
    private)."""
    strongest_bot: str = "random-v0"
    """Id (in ``games.bots.registry``) of the strongest reference bot for the game: the opponent
    that evaluation's ``strongest`` names."""
    simulator: str | None = None
    """Id (in ``simulators.registry``) of the simulator that fills the game's simulatable seats
    where a reference is needed and the config names none: evaluation measures the other seats
    against it (retail's user: ``scripted-user-v0``). None: such seats get the strongest bot."""
    max_turns: int | None = None
    """The default turn limit (a game may derive its own from constructor arguments); None when
    only a built game knows it (adapters)."""
    zero_sum: bool | None = None
    """Whether final returns always sum to zero; None (not stated) means ``kind ==
    "competitive"``."""
    requires: str | None = None
    """The top-level module the game needs beyond Arena's own dependencies (``"pyspiel"``,
    ``"textarena"``), or None; :meth:`available` checks it."""
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """Constructor arguments registered with the id (``{"game": "kuhn_poker"}``)."""
    plugin: str | None = None
    """The distribution whose ``arena.games`` entry point registered the id; None for Arena's own."""

    def __post_init__(self) -> None:
        parse_id(self.id)
        seats = self.seats
        if (
            not isinstance(seats, tuple | list)
            or len(seats) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in seats)
            or not 1 <= seats[0] <= seats[1]
        ):
            raise ValueError(
                f"'seats' must be a (min, max) pair of ints with 1 <= min <= max, got {seats!r}"
            )
        object.__setattr__(self, "seats", tuple(seats))
        if self.kind not in KINDS:
            raise ValueError(f"'kind' must be one of {KINDS}, got {self.kind!r}")
        if self.information not in INFORMATION:
            raise ValueError(
                f"'information' must be one of {INFORMATION}, got {self.information!r}"
            )
        try:
            parse_id(self.strongest_bot)
        except RegistryError as err:
            raise ValueError(f"'strongest_bot' must be a bot id: {err}") from None
        if self.simulator is not None:
            try:
                parse_id(self.simulator)
            except RegistryError as err:
                raise ValueError(f"'simulator' must be a simulator id or None: {err}") from None
        if self.max_turns is not None and (
            not isinstance(self.max_turns, int) or self.max_turns < 1
        ):
            raise ValueError(f"'max_turns' must be a positive int or None, got {self.max_turns!r}")
        if self.zero_sum is None:
            object.__setattr__(self, "zero_sum", self.kind == "competitive")
        elif not isinstance(self.zero_sum, bool):
            raise ValueError(f"'zero_sum' must be a bool, got {self.zero_sum!r}")
        if self.requires is not None and not (
            isinstance(self.requires, str)
            and all(p.isidentifier() for p in self.requires.split("."))
        ):
            raise ValueError(f"'requires' must be a module name or None, got {self.requires!r}")
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    def available(self) -> bool:
        """Whether the module the game :attr:`requires` is installed (always, when none)."""
        return self.requires is None or importlib.util.find_spec(self.requires) is not None

    @classmethod
    def from_entry(cls, entry: Entry[TextGame]) -> GameSpec:
        """The spec of a registry entry: its registered metadata over its class's ``metadata``."""

        def fail(reason: str) -> GameSpecError:
            return GameSpecError(entry.id, entry.target, entry.plugin, reason)

        registered = dict(entry.metadata)
        unknown = sorted(set(registered) - set(METADATA_FIELDS))
        if unknown:
            raise fail(
                f"registered with unknown metadata {unknown}; the fields are "
                f"{', '.join(METADATA_FIELDS)}"
            )
        source, meta = "its registration", registered
        if not all(name in registered for name in REQUIRED):
            try:
                factory = entry.load()
            except Exception as err:  # anything its module raises: name it, never crash a listing
                raise fail(f"cannot import it: {type(err).__name__}: {err}") from err
            source = f"{getattr(factory, '__qualname__', entry.target)}.metadata"
            meta = {**_class_metadata(factory, source, fail), **registered}
        try:
            return cls(
                id=entry.id,
                entry_point=entry.target,
                kwargs=entry.kwargs,
                plugin=entry.plugin,
                **meta,
            )
        except (TypeError, ValueError) as err:
            raise fail(f"{source}: {err}") from None


METADATA_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(GameSpec)
    if f.name not in ("id", "entry_point", "kwargs", "plugin")
)
"""Spec fields a registration or a class's ``metadata`` may state."""


def _class_metadata(
    factory: Any, source: str, fail: Callable[[str], GameSpecError]
) -> dict[str, Any]:
    """The spec fields of a game class's ``metadata``; it must be a :class:`TextGame`."""
    if not isinstance(factory, type):
        raise fail(
            f"{factory!r} is not a games.TextGame subclass; register the class, or "
            f"register {', '.join(REQUIRED)} with the id"
        )
    if not issubclass(factory, TextGame):
        bases = ", ".join(
            f"{b.__module__}.{b.__qualname__}" for b in factory.__bases__ if b is not object
        )
        raise fail(
            f"{factory.__qualname__} is not a games.TextGame"
            + (f" (its bases: {bases})" if bases else "")
        )
    meta = getattr(factory, "metadata", None)
    if not isinstance(meta, Mapping):
        raise fail(f"{source} is not a mapping")
    missing = [name for name in REQUIRED if name not in meta]
    if missing:
        raise fail(
            f"{source} lacks {', '.join(map(repr, missing))}; start it from "
            "{**TextGame.metadata, ...}"
        )
    return {name: meta[name] for name in METADATA_FIELDS if name in meta}
