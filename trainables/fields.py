"""Type checks driven by dataclass field annotations: one clear line per wrong value.

A string where a number belongs (a YAML typo, a CLI value) must fail where it is given, naming
the field and the type it wants, not deep inside a trial as a TypeError.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal, Union

_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
          dict: "a mapping", list: "a list", tuple: "a list", type(None): "null"}


def matches(value: Any, tp: Any) -> bool:
    """Whether `value` is of annotated type `tp` (int is a valid float; bool is not a number)."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(matches(value, arg) for arg in typing.get_args(tp))
    if origin is Literal:
        return value in typing.get_args(tp)
    if origin is not None:
        tp = origin  # dict[str, Any] -> dict, tuple[int, ...] -> tuple
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is tuple:
        return isinstance(value, (tuple, list))
    return isinstance(value, tp) if isinstance(tp, type) else True


def describe(tp: Any) -> str:
    """'a number', 'an integer or null', 'one of ['a', 'b']' ..."""
    if tp is Any:
        return "anything"
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(arg) for arg in typing.get_args(tp))
    if origin is Literal:
        return f"one of {list(typing.get_args(tp))}"
    return _WORDS.get(origin or tp, getattr(tp, "__name__", str(tp)))


def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_value(name: str, value: Any, tp: Any) -> None:
    if not matches(value, tp):
        raise ValueError(f"{name}: expected {describe(tp)}, got {value!r}")


def check_fields(obj: Any, skip: tuple[str, ...] = ()) -> None:
    """Raise ValueError for the first field whose value does not match its annotation."""
    types_ = hints(type(obj))
    for f in dataclasses.fields(obj):
        if f.name not in skip:
            check_value(f.name, getattr(obj, f.name), types_[f.name])
