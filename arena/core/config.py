"""The one config loader of Arena: dataclasses with a docstring per field, merged by omegaconf.

``load_config(Schema, "configs/x.yaml", ["a.b=c"])`` merges, in order, the schema's defaults,
the YAML file (after the file it ``extends``, if any), and ``key=value`` overrides
(``key:=value`` replaces a mapping instead of merging into it: :mod:`arena.core.overrides`).
``from_dict(Schema, mapping)`` does the same for a mapping. An unknown key or a wrong type is a
:class:`~arena.core.errors.ConfigError` naming the key and its nearest valid name, before
anything starts.

The same schemas give command-line flags: :func:`add_arguments` adds one ``--flag`` per field
(its help is the field's docstring) and :func:`from_arguments` builds the dataclass back, so a
process's flags and its config section can never disagree on a name or a default.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import functools
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from arena.core.errors import ConfigError, did_you_mean
from arena.core.overrides import apply_override, parse_overrides

S = TypeVar("S")


def load_config(schema: type[S], path: str | Path | None, overrides: Sequence[str] = ()) -> S:
    """Defaults, then the YAML file (and what it extends), then ``a.b=c`` overrides."""
    layers = _extends_chain(Path(path)) if path is not None else []
    return _merge(schema, layers, overrides)


def from_dict(schema: type[S], data: Mapping[str, Any], where: str = "config") -> S:
    """``data`` (a nested mapping) over the schema's defaults."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(data).__name__}")
    return _merge(schema, [(where, OmegaConf.create(dict(data)))], ())


def to_yaml(config: Any) -> str:
    """A config dataclass as YAML (saved in every run directory)."""
    return OmegaConf.to_yaml(OmegaConf.structured(config))


@functools.cache
def schema_defaults(schema: type) -> DictConfig:
    """``schema``'s defaults as a typed omegaconf tree, built once per process (0.1 s for a
    run's config; ``arena preload`` builds a run's before it forks). Copy it before changing it."""
    return OmegaConf.structured(schema)


def _merge(schema: type[S], layers: list[tuple[str, Any]], overrides: Sequence[str]) -> S:
    merged: DictConfig = copy.deepcopy(schema_defaults(schema))
    parsed = parse_overrides(overrides)
    for source, layer in layers:
        try:
            merged = OmegaConf.merge(merged, layer)
        except OmegaConfBaseException as err:
            # a list item's error names its keys from the item: find the item
            prefix, schema_at, item_err = _locate_in_lists(layer, schema, "")
            raise ConfigError(f"{source}: {_explain(item_err or err, schema_at, prefix)}") from None
        except TypeError as err:
            raise ConfigError(f"{source}: {err}") from None
    for override in parsed:
        try:
            apply_override(merged, override, parsed)
        except ConfigError:
            raise
        except OmegaConfBaseException as err:
            raise ConfigError(f"command line: {_explain(err, schema, key=override.key)}") from None
        except (TypeError, IndexError, ValueError) as err:
            raise ConfigError(f"command line: {override.key}: {err}") from None
    try:
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        raise ConfigError(_explain(err, schema)) from None
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(str(err).strip("'\"")) from None


def _extends_chain(path: Path) -> list[tuple[str, Any]]:
    """Each file of the chain ``path`` starts (its ``extends:``, theirs, ...), parsed, without
    its ``extends`` key: the first one extended first."""
    if not path.is_file():
        siblings = [f.name for f in path.parent.glob("*.y*ml")] if path.parent.is_dir() else []
        hint = did_you_mean(path.name, siblings, prefix=f"{path.parent}/")
        raise ConfigError(f"config file {path} does not exist{hint}")
    layer = _read_yaml(path)
    parent = layer.pop("extends", None) if isinstance(layer, DictConfig) else None
    chain = _extends_chain(path.parent / parent) if parent else []
    return [*chain, (str(path), layer)]


def _read_yaml(path: Path) -> Any:
    """The file, parsed; malformed YAML is a :class:`ConfigError` of one line naming the file,
    line and column (``run.yaml:3:6: malformed YAML: ...``), as an editor jumps to it."""
    try:
        return OmegaConf.load(path)
    except Exception as err:  # PyYAML's MarkedYAMLError: arena.core imports omegaconf only
        mark = getattr(err, "problem_mark", None)
        if mark is None:
            raise
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context, where = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and where is not None:
            problem += f" ({context} at line {where.line + 1}, column {where.column + 1})"
        raise ConfigError(
            f"{path}:{mark.line + 1}:{mark.column + 1}: malformed YAML: {problem}"
        ) from None


def _explain(err: OmegaConfBaseException, schema: type, prefix: str = "", key: str = "") -> str:
    """One line naming the key (``games.0.simulators.user``, the override syntax) and what is
    wrong there; ``prefix`` is where ``schema`` sits in the whole config (a list item's
    ``games.0.``), since omegaconf names a list item's keys from the item, and ``key`` the
    override that failed, whose head omegaconf leaves off a node it has just added."""
    named = getattr(err, "full_key", None) or getattr(err, "key", None) or ""
    key = _rooted(re.sub(r"\[(\d+)\]", r".\1", str(named)), key)
    message = str(err).splitlines()[0]
    name = type(err).__name__
    if "not in" in message or "Key" in name or "ConfigAttributeError" in name:
        parent, _, leaf = key.rpartition(".")
        valid = field_names(schema, parent)
        hint = did_you_mean(leaf, valid, prefix=f"{prefix}{parent}." if parent else prefix)
        return f"unknown key {prefix + key!r}{hint} (valid here: {', '.join(valid)})"
    wanted = re.match(
        r"Invalid type assigned: (\w+) is not a subclass of (\w+)\. value: (.*)", message
    )
    if wanted and wanted.group(1) in ("str", "int", "float", "bool"):
        got, cls, value = wanted.groups()
        leaf = key.rpartition(".")[2]
        fields = field_names(schema, key)
        fix = f"{{id: {value}}}" if "id" in fields else f"a mapping of {', '.join(fields)}"
        fix = fix if leaf.isdigit() or not leaf else f"{leaf}: {fix}"
        return f"{prefix + key}: a {cls} is a mapping, not the {got} {value!r}: write {fix}"
    return f"{prefix + key}: {message}" if key else message


def _rooted(named: str, override_key: str) -> str:
    """``named`` from the root: ``user`` of the override ``games.0.simulators.user`` is that
    override's key; a key that starts at the root (or no override) is kept."""
    parts = override_key.split(".") if override_key else []
    if not named or not parts or named.split(".")[0] == parts[0]:
        return named
    for start in range(1, len(parts)):
        tail = ".".join(parts[start:])
        if named == tail or named.startswith(tail + "."):
            return ".".join(parts[:start]) + "." + named
    return named


def _locate_in_lists(node: Any, schema: type, prefix: str) -> tuple[str, type, Any]:
    """The list item of ``node`` (a YAML layer) that fails to merge into its item schema, as
    (``games.0.``, the item's schema, its error), or ``("", schema, None)``. omegaconf names
    the keys of a list item from the item itself (``simulators.user``), so the item's place in
    the config is found here by merging each item of each ``list[Dataclass]`` field alone."""
    if not isinstance(node, DictConfig) or not dataclasses.is_dataclass(schema):
        return "", schema, None
    hints = get_type_hints(schema)
    for f in dataclasses.fields(schema):
        hint, value = hints.get(f.name), node.get(f.name) if f.name in node else None
        args = getattr(hint, "__args__", ())
        if typing.get_origin(hint) is list and args and dataclasses.is_dataclass(args[0]):
            for index, item in enumerate(value if isinstance(value, ListConfig) else []):
                if not isinstance(item, DictConfig):  # omegaconf names this item itself
                    return "", schema, None
                where = f"{prefix}{f.name}.{index}."
                try:
                    OmegaConf.merge(OmegaConf.structured(args[0]), item)
                except OmegaConfBaseException as err:
                    deeper = _locate_in_lists(item, args[0], where)
                    return deeper if deeper[2] is not None else (where, args[0], err)
        elif dataclasses.is_dataclass(hint) and value is not None:
            deeper = _locate_in_lists(value, hint, f"{prefix}{f.name}.")
            if deeper[2] is not None:
                return deeper
    return "", schema, None


def field_names(schema: type, dotted: str = "") -> list[str]:
    """Field names of the dataclass reached by ``dotted`` from ``schema`` (list indices skipped)."""
    cls: Any = schema
    for part in filter(None, dotted.split(".")):
        part = part.split("[")[0]
        if not part or part.isdigit():
            continue
        if not dataclasses.is_dataclass(cls):  # a dict[str, Dataclass]: this part is its key
            cls = next(
                (a for a in getattr(cls, "__args__", ()) if dataclasses.is_dataclass(a)), None
            )
            continue
        hint = get_type_hints(cls).get(part)
        args = getattr(hint, "__args__", ())
        cls = args[0] if args and dataclasses.is_dataclass(args[0]) else hint
    return [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []


@functools.cache
def field_docs(schema: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), by field name."""
    docs: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        if not dataclasses.is_dataclass(cls):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def add_arguments(
    parser: argparse.ArgumentParser, schema: type, exclude: Sequence[str] = ()
) -> None:
    """One ``--flag`` per scalar field of ``schema`` (``max_batch`` -> ``--max-batch``), with
    the field's default and docstring. A bool field gives ``--flag`` / ``--no-flag``."""
    docs = field_docs(schema)
    hints = get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if f.name in exclude or f.default is dataclasses.MISSING:
            continue
        kind = _scalar(hints[f.name])
        if kind is None:
            continue
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{docs.get(f.name, '')} (default: {f.default})".replace("``", "").replace(
            "%", "%%"
        )
        if kind is bool:
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text
            )
        else:
            parser.add_argument(flag, type=kind, default=f.default, dest=f.name, help=help_text)


def to_arguments(config: Any, exclude: Sequence[str] = ()) -> list[str]:
    """The flags that :func:`add_arguments` parses back into ``config`` (a dataclass
    instance): ``--max-batch 32``, ``--no-shm-weights``; None values are left out (their
    flags default to None)."""
    argv: list[str] = []
    hints = get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in exclude or f.default is dataclasses.MISSING or value is None:
            continue
        kind = _scalar(hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        if kind is bool:
            argv.append(flag if value else "--no-" + flag[2:])
        elif kind is not None:
            argv += [flag, str(value)]
    return argv


def from_arguments(schema: type[S], args: argparse.Namespace, **fields: Any) -> S:
    """The dataclass ``schema`` from parsed flags (see :func:`add_arguments`); ``fields``
    fill or override the rest."""
    values = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(schema) if hasattr(args, f.name)
    }
    return schema(**{**values, **fields})


def parse_assignments(pairs: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``: each value read as a Python literal where it
    is one, else kept as text. Raises :class:`ConfigError` for an item without ``=``."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected KEY=VALUE, got {pair!r}")
        try:
            values[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            values[key] = value
    return values


def _scalar(hint: Any) -> type | None:
    """The Python type a flag of this annotation parses to, or None for non-scalar fields."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return _scalar(args[0]) if len(args) == 1 else None
    return hint if hint in (str, int, float, bool) else None
