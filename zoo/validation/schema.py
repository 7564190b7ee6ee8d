"""Typed validation of data files (specs, results, submissions) against dataclasses.

`from_data(cls, data, where)` builds a (frozen) dataclass from plain YAML/JSON data. It raises
`SchemaError` for an unknown key, a missing key, a wrong type, or an empty list/dict where one is not
allowed. The error names the file, the key path and what was expected.

A type ``Annotated[T, Domain(...)]`` (`zoo.validation.domains`) is checked as T, then against its
domain.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Annotated, Any, Union

from zoo.validation.domains import domain_of
from zoo.validation.inputs import MAX_INT, NAME, text_problem, value_problem


class SchemaError(ValueError):
    """A data file does not match its schema; the message names file, key and expectation."""

    def __init__(self, where: str, key: str, message: str):
        self.where, self.key, self.reason = where, key, message
        super().__init__(f"{where}: {key or '<root>'}: {message}")


class DomainError(SchemaError):
    """A value of the right type outside its field's domain (`zoo.validation.domains`)."""


def _shown(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters and ASCII-escaped: a message quotes a value, not a megabyte."""
    text = ascii(value) if isinstance(value, str) else repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and len(text) > limit:
        return f"<an integer of {len(text):,} digits>"
    return text if len(text) <= limit else text[:limit] + "…"


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', origin)}[{args}]"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def convert(tp: Any, value: Any, where: str, key: str) -> Any:
    """Checks `value` against the type annotation `tp` and converts containers."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:  # free-form data (a model's config): still finite, 64-bit, plain text, bounded
        problem = value_problem(value, finite=False)  # strict JSON refuses NaN; a spec's domains say why
        if problem is not None:
            inner, reason = problem
            raise SchemaError(where, f"{key}.{inner}" if inner and key else inner or key, reason)
        return value
    if origin is Annotated:
        domain = domain_of(tp)
        if domain is not None and isinstance(value, float) and not math.isfinite(value):
            raise DomainError(where, key, domain.violation(value))  # the domain's words, not "finite"
        value = convert(args[0], value, where, key)
        reason = domain.violation(value) if domain is not None else None
        if reason is not None:
            raise DomainError(where, key, reason)
        return value
    if origin is typing.Literal:
        if value not in args:
            raise SchemaError(where, key, f"expected one of {list(args)}, got {_shown(value)}")
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [option for option in args if option is not type(None)]
        if len(options) == 1:  # Optional[X]: X's own error names the key and the reason
            try:
                return convert(options[0], value, where, key)
            except SchemaError as error:
                if error.key != key or isinstance(error, DomainError):  # the inner reason says it best
                    raise
                raise SchemaError(where, key, f"{error.reason} (or null)") from None
        for option in options:
            try:
                return convert(option, value, where, key)
            except SchemaError:
                continue
        raise SchemaError(where, key, f"expected {_type_name(tp)}, got {type(value).__name__} {_shown(value)}")
    if tp is type(None):
        if value is not None:
            raise SchemaError(where, key, f"expected null, got {_shown(value)}")
        return None
    if dataclasses.is_dataclass(tp):
        return from_data(tp, value, where, key)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise SchemaError(where, key, f"expected a list, got {type(value).__name__} {_shown(value)}")
        item_type = args[0] if args else Any
        items = [convert(item_type, v, where, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items)
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise SchemaError(where, key, f"expected a mapping, got {type(value).__name__} {_shown(value)}")
        key_type, value_type = args if args else (Any, Any)
        return {convert(key_type, k, where, f"{key}.{k}"): convert(value_type, v, where, f"{key}.{k}")
                for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(where, key, f"expected a number, got {type(value).__name__} {_shown(value)}")
        if isinstance(value, int) and not -MAX_INT - 1 <= value <= MAX_INT:
            raise SchemaError(where, key, "expected a finite number, got an integer beyond 64 bits")
        if not math.isfinite(value):
            raise SchemaError(where, key, f"expected a finite number, got {value}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(where, key, f"expected an integer, got {type(value).__name__} {_shown(value)}")
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise SchemaError(where, key, f"expected a 64-bit integer, got one of {len(str(abs(value))):,} digits")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise SchemaError(where, key, f"expected {tp.__name__}, got {type(value).__name__} {_shown(value)}")
        problem = text_problem(value) if tp is str else None
        if problem is not None:
            raise SchemaError(where, key, problem)
        return value
    raise TypeError(f"schema type {tp!r} is not supported")  # a programming error, not the user's


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved type hints, domains kept (resolving hints is slow; classes don't change)."""
    return typing.get_type_hints(cls, include_extras=True)


@functools.cache
def _fields(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field]]:
    return type_hints(cls), {f.name: f for f in dataclasses.fields(cls) if f.init}


def from_data(cls: type, data: Any, where: str, key: str = "") -> Any:
    """Builds dataclass `cls` from a mapping, rejecting unknown and missing keys."""
    if not isinstance(data, dict):
        raise SchemaError(where, key,
                          f"expected a mapping for {cls.__name__}, got {type(data).__name__} {_shown(data)}")
    hints, fields = _fields(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        shown = unknown[0] if NAME.fullmatch(str(unknown[0])) else ascii(str(unknown[0])[:60])
        path = f"{key}.{shown}" if key else shown
        raise SchemaError(where, path, f"unknown key; expected one of {sorted(fields)}")
    values = {}
    for name, field in fields.items():
        path = f"{key}.{name}" if key else name
        if name not in data:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise SchemaError(where, path, f"missing; expected {_type_name(hints[name])}")
            continue
        values[name] = convert(hints[name], data[name], where, path)
    instance = cls(**values)
    check = getattr(instance, "validate", None)
    if check is not None:
        check(where, key)
    return instance


def to_data(instance: Any) -> Any:
    """The inverse of `from_data`: plain dicts/lists suitable for YAML/JSON."""
    if dataclasses.is_dataclass(instance):
        return {f.name: to_data(getattr(instance, f.name)) for f in dataclasses.fields(instance)}
    if isinstance(instance, (list, tuple)):
        return [to_data(v) for v in instance]
    if isinstance(instance, dict):
        return {k: to_data(v) for k, v in instance.items()}
    return instance
