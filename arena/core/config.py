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
import dataclasses
import functools
import inspect
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from arena.core.errors import ConfigError, did_you_mean
from arena.core.overrides import apply_override, parse_overrides

S = TypeVar("S")


def load_config(schema: type[S], path: str | Path | None, overrides: Sequence[str] = ()) -> S:
    """Defaults, then the YAML file (and what it extends), then ``a.b=c`` overrides."""
    layers: list[tuple[str, Any]] = []
    if path is not None:
        for file in _extends_chain(Path(path)):
            layer = _read_yaml(file)
            if isinstance(layer, DictConfig):
                layer.pop("extends", None)
            layers.append((str(file), layer))
    return _merge(schema, layers, overrides)


def from_dict(schema: type[S], data: Mapping[str, Any], where: str = "config") -> S:
    """``data`` (a nested mapping) over the schema's defaults."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(data).__name__}")
    return _merge(schema, [(where, OmegaConf.create(dict(data)))], ())


def to_yaml(config: Any) -> str:
    """A config dataclass as YAML (saved in every run directory)."""
    return OmegaConf.to_yaml(OmegaConf.structured(config))


def _merge(schema: type[S], layers: list[tuple[str, Any]], overrides: Sequence[str]) -> S:
    merged: DictConfig = OmegaConf.structured(schema)
    parsed = parse_overrides(overrides)
    for source, layer in layers:
        try:
            merged = OmegaConf.merge(merged, layer)
        except OmegaConfBaseException as err:
            raise ConfigError(f"{source}: {_explain(err, schema)}") from None
        except TypeError as err:
            raise ConfigError(f"{source}: {err}") from None
    for override in parsed:
        try:
            apply_override(merged, override, parsed)
        except ConfigError:
            raise
        except OmegaConfBaseException as err:
            raise ConfigError(f"command line: {_explain(err, schema)}") from None
        except (TypeError, IndexError, ValueError) as err:
            raise ConfigError(f"command line: {override.key}: {err}") from None
    try:
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        raise ConfigError(_explain(err, schema)) from None
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(str(err).strip("'\"")) from None


def _extends_chain(path: Path) -> list[Path]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    raw = _read_yaml(path)
    parent = raw.pop("extends", None) if isinstance(raw, DictConfig) else None
    chain = _extends_chain(path.parent / parent) if parent else []
    return [*chain, path]


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


def _explain(err: OmegaConfBaseException, schema: type) -> str:
    key = getattr(err, "full_key", None) or getattr(err, "key", None) or ""
    message = str(err).splitlines()[0]
    name = type(err).__name__
    if "not in" in message or "Key" in name or "ConfigAttributeError" in name:
        parent, _, leaf = str(key).rpartition(".")
        valid = field_names(schema, parent)
        hint = did_you_mean(leaf, valid, prefix=f"{parent}." if parent else "")
        return f"unknown key {key!r}{hint} (valid here: {', '.join(valid)})"
    return f"{key}: {message}" if key else message


def field_names(schema: type, dotted: str = "") -> list[str]:
    """Field names of the dataclass reached by ``dotted`` from ``schema`` (list indices skipped)."""
    cls: Any = schema
    for part in filter(None, dotted.split(".")):
        part = part.split("[")[0]
        if not part or part.isdigit():
            continue
        hint = get_type_hints(cls).get(part)
        args = getattr(hint, "__args__", ())
        cls = args[0] if args and dataclasses.is_dataclass(args[0]) else hint
        if not dataclasses.is_dataclass(cls):
            return []
    return [f.name for f in dataclasses.fields(cls)]


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
