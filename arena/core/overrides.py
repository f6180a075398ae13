"""Command-line overrides of a config: ``key=value`` merges, ``key:=value`` replaces.

``key=value`` sets a value the way a YAML layer does: a mapping merges into the one already
there (``games.0.kwargs={max_turns: 4}`` keeps the game's other kwargs). ``key:=value``
replaces what is there instead: ``games.0.simulators.user.kwargs:={}`` leaves no kwargs, and
``games.0.simulators.user:={id: llm-user-v0}`` a simulator with its schema's defaults and
that id, nothing of the old one. ``key={}`` over a mapping that is not empty changes nothing,
so it is refused with a pointer to ``:=``.

Changing an id also drops the arguments that belonged to the old one: an override that
changes ``id`` (a game's or a simulator's), ``role`` or ``bot``, as a key or inside a mapping
(``...user={id: X}``), empties the sibling ``kwargs``, ``role_kwargs`` or ``bot_kwargs`` that
the files gave, since the old arguments rarely fit the new class and would only fail later,
in the first episode. Arguments given on the same command line (in that mapping, or as keys
before or after the id) are the new one's (``...user.id=X ...user.kwargs.persona=Y``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

from omegaconf import DictConfig, ListConfig, OmegaConf

from arena.core.errors import ConfigError

ARGUMENTS_OF = {"id": "kwargs", "role": "role_kwargs", "bot": "bot_kwargs"}
"""An id field -> the sibling field holding the keyword arguments for what it names."""


class Override(NamedTuple):
    """One parsed ``key=value`` (``replace``: it was ``key:=value``)."""

    key: str
    text: str
    replace: bool

    @classmethod
    def parse(cls, item: str) -> Override:
        key, sep, text = item.partition("=")
        if not sep or not key.strip(": "):
            raise ConfigError(f"override {item!r} must look like key=value (e.g. steps=4)")
        replace = key.endswith(":")
        return cls(key.removesuffix(":").strip(), text, replace)

    def __str__(self) -> str:
        return f"{self.key}{':=' if self.replace else '='}{self.text}"


def parse_overrides(items: Sequence[str]) -> list[Override]:
    """Each ``key=value`` / ``key:=value`` item parsed; the first malformed one is refused. A
    piece without ``=`` after an item whose brackets stay open is a value the shell split at a
    space (``games.0.kwargs={max_turns: 4}`` typed unquoted): that says to quote it."""
    for at, item in enumerate(items):
        if at and "=" not in item and _depth(items[at - 1]) > 0:
            start, end = at - 1, at  # {a: 1, b: 2} is four pieces: gather the rest
            while end < len(items) and _depth(" ".join(items[start : end + 1])) > 0:
                end += 1
            whole = " ".join(items[start : end + 1])
            raise ConfigError(
                f"override {items[start]!r} ends inside a mapping or list that {item!r} "
                f"continues: the shell split one value at its spaces; quote it: '{whole}'"
            )
    return [Override.parse(item) for item in items]


def _depth(text: str) -> int:
    """How many more ``{``/``[`` than ``}``/``]`` ``text`` has (> 0: a value cut off)."""
    return sum((char in "{[") - (char in "}]") for char in text)


def apply_override(merged: DictConfig, override: Override, others: Sequence[Override]) -> None:
    """Apply one override to ``merged`` in place; ``others`` is the whole command line (an id
    change keeps the arguments given beside it). omegaconf errors propagate to the caller,
    which names the key."""
    key = override.key
    value = _value(override)
    add_typed_entries(merged, key)
    current = OmegaConf.select(merged, key, default=None, throw_on_missing=False)
    if override.replace:
        # update() refuses a plain dict where a dataclass lives: give it the schema's
        # defaults under the new value, which is what the new value means on its own
        schema = _schema_at(merged, key, current)
        OmegaConf.update(merged, key, _typed(schema, current, value), merge=False)
        return
    if isinstance(value, DictConfig) and not value and isinstance(current, DictConfig) and current:
        raise ConfigError(
            f"command line: {key}={{}} merges an empty mapping into {key}, which changes "
            f"nothing; {key}:={{}} replaces it (see `arena train --help`)"
        )
    _drop_old_arguments(merged, override, value, current, others)
    # update() understands list indices (games.0.id=...), which a dotlist merge does not.
    OmegaConf.update(merged, key, value, merge=True, force_add=False)


def _value(override: Override) -> Any:
    """The override's value read as YAML, as a config file's would be; malformed YAML (an
    unclosed ``[`` or ``{``, which a shell's quoting easily causes) is a :class:`ConfigError`
    naming the override, not PyYAML's traceback."""
    try:
        return OmegaConf.from_dotlist([f"value={override.text}"])["value"]
    except Exception as err:  # PyYAML's MarkedYAMLError: arena.core imports omegaconf only
        if getattr(err, "problem_mark", None) is None:
            raise
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(
            f"command line: override {str(override)!r}: malformed YAML value: {problem}"
            + (f" ({context})" if context else "")
        ) from None


def _drop_old_arguments(
    merged: DictConfig, override: Override, value: Any, current: Any, line: Sequence[Override]
) -> None:
    """``X.id=new`` (or ``X={id: new, ...}``) empties ``X.kwargs``, likewise for ``role`` and
    ``bot``: arguments of the old class would reach the new one. Those the command line gives
    (in the same mapping, or as keys before or after) are the new one's."""
    for target in _old_arguments(override.key, value, current):
        node = OmegaConf.select(merged, target, default=None, throw_on_missing=False)
        if not isinstance(node, DictConfig) or not node:
            continue
        OmegaConf.update(merged, target, {}, merge=False)
        # the ones given earlier on the line were just emptied too: give them again
        for earlier in line[: line.index(override)]:
            if earlier.key == target or earlier.key.startswith(f"{target}."):
                apply_override(merged, earlier, line)


def _old_arguments(key: str, value: Any, current: Any) -> list[str]:
    """The arguments fields (``games.0.simulators.user.kwargs``) whose id the override at
    ``key`` changes, as a leaf (``...user.id=X``) or inside a mapping (``...user={id: X}``)."""
    parent, _, leaf = key.rpartition(".")
    if leaf in ARGUMENTS_OF:
        changed = current is not None and current != value
        return [f"{parent}.{ARGUMENTS_OF[leaf]}" if parent else ARGUMENTS_OF[leaf]] * changed
    if not (isinstance(value, DictConfig) and isinstance(current, DictConfig)):
        return []
    return [
        f"{key}.{arguments}"
        for name, arguments in ARGUMENTS_OF.items()
        if name in value and current.get(name) != value[name]
    ]


def _schema_at(merged: DictConfig, key: str, current: Any) -> Any:
    """The dataclass type of the node at ``key`` (of its items, for a list), or None: read
    from the node there, else from its parent mapping's element type (a new entry)."""
    if isinstance(current, DictConfig):
        return current._metadata.object_type
    if isinstance(current, ListConfig):
        return current._metadata.element_type
    parent_key = key.rpartition(".")[0]
    parent = OmegaConf.select(merged, parent_key, default=None) if parent_key else merged
    return parent._metadata.element_type if isinstance(parent, DictConfig) else None


def _typed(schema: Any, current: Any, value: Any) -> Any:
    """``value`` as a fresh node of the dataclass ``schema`` (its defaults under the value),
    or each item so for a list of them; anything else as it is."""
    if not _is_dataclass_type(schema):
        return value
    if isinstance(value, DictConfig) and not isinstance(current, ListConfig):
        return OmegaConf.merge(OmegaConf.structured(schema), value)
    if isinstance(value, ListConfig) and isinstance(current, ListConfig):
        return [OmegaConf.merge(OmegaConf.structured(schema), item) for item in value]
    return value


def add_typed_entries(merged: DictConfig, key: str) -> None:
    """Create the new entries of a mapping of dataclasses that ``key`` passes through, from the
    dataclass's defaults: ``games.0.simulators.agent.id=X`` adds ``agent`` as a
    ``SimulatorConfig`` first. omegaconf's update would assign a plain dict there and refuse it
    ("dict is not a subclass of SimulatorConfig"), while the same entry in YAML merges."""
    node: Any = merged
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        if isinstance(node, ListConfig):
            if not part.isdigit():
                return  # update() explains a bad index
            if int(part) >= len(node):  # update() would say "dict is not a subclass of ..."
                where, n = ".".join(parts[:depth]), len(node)
                raise ConfigError(
                    f"command line: {key}: {where} has {n} {'entry' if n == 1 else 'entries'}, "
                    f"so there is no "
                    f"{where}.{part}; {where}:=[...] gives the whole list"
                )
            node = node[int(part)]
            continue
        if not isinstance(node, DictConfig):
            return
        if part not in node:
            element = node._metadata.element_type
            if not _is_dataclass_type(element):
                return  # a field of a dataclass, or a plain mapping: update() handles it
            node[part] = OmegaConf.structured(element)
        node = node[part]


def _is_dataclass_type(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and isinstance(value, type)
