"""Command-line flags derived from a config dataclass: its fields, types, choices and field docs.

`orchestrator search` takes one flag per `SearchSpec` field, so the flags cannot drift from the
dataclass: adding a field adds its flag, with the field's type, its Literal choices and the first
sentence of its docstring as help. What a field's name cannot say goes in its `metadata`:

    num_trials: int = field(default=8, metadata={"flag": "--trials"})   # flag spelling
    baseline: str | None = field(default=None, metadata={"metavar": "seeds|base|none|PATH"})
    handle: Any = field(default=None, metadata={"flag": None})          # deliberately no flag

Types become flags as follows ('X | None' reads as X): bool -> a switch (store_true, default
None, so a spec file's value stands unless the flag is given); Literal -> its choices; int, float,
str -> that type; a dict -> repeated `FLAG KEY=VALUE`; a union with str (`str | Any`: a path or
an in-memory object) -> its string form. Every flag defaults to None: only the flags given
override a spec file. Docs are read from the class source with `ast`, as tyro and simple-parsing
do (Python keeps no attribute docstrings at runtime).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import types
import typing
from typing import Any, Literal, Union

import yaml

from orchestrator.plain_yaml import load_value

_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")  # ". Next": not "e.g. lr", not "nn.Module"


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """{field: its docstring} for every documented field of `cls` and its dataclass bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # a subclass's doc wins over its base's
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # made at runtime (make_dataclass): no source to read
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, after in zip(body, body[1:]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def first_sentence(doc: str) -> str:
    """The doc's first sentence on one line: a flag's help."""
    return _SENTENCE_END.split(" ".join(doc.split()), maxsplit=1)[0]


def flag_name(f: dataclasses.Field) -> str | None:
    """`--field-name`, or the field's metadata "flag" (None: deliberately not a flag)."""
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


def literal_choices(tp: Any) -> tuple | None:
    """The values of a Literal annotation (also inside `X | None`), else None."""
    tp = _without_none(tp)
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else None


def key_value(flag: str):
    """The argparse type of a repeated `FLAG KEY=VALUE`: (key, value read as YAML)."""

    def parse(text: str) -> tuple[str, Any]:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{flag} wants KEY=VALUE, got {text!r}")
        try:
            return key, load_value(value)
        except yaml.YAMLError:
            raise argparse.ArgumentTypeError(f"{flag} {key}: cannot read value {value!r}") \
                from None

    return parse


def add_field_flags(parser: argparse.ArgumentParser, cls: type) -> list[str]:
    """Add one flag per field of dataclass `cls` (dest: the field name); the flags added."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    added = []
    for f in dataclasses.fields(cls):
        flag = flag_name(f)
        if flag is None:
            continue
        parser.add_argument(flag, dest=f.name, default=None,
                            help=_help(docs.get(f.name, ""), f).replace("%", "%%"),
                            **_argparse_kwargs(f, hints[f.name], flag))
        added.append(flag)
    return added


def spec_options(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """{field: value} of the flags given (a repeated KEY=VALUE flag becomes a dict)."""
    hints, options = typing.get_type_hints(cls), {}
    for f in dataclasses.fields(cls):
        value = getattr(args, f.name, None)
        if flag_name(f) is not None and value is not None:
            options[f.name] = dict(value) if _is_dict(hints[f.name]) else value
    return options


def _argparse_kwargs(f: dataclasses.Field, tp: Any, flag: str) -> dict[str, Any]:
    tp = _without_none(tp)
    choices = literal_choices(tp)
    metavar = f.metadata.get("metavar", flag.lstrip("-").replace("-", "_").upper())
    if tp is bool:
        return {"action": "store_true"}
    if choices is not None:
        return {"type": type(choices[0]), "choices": choices}
    if tp in (int, float, str):
        return {"type": tp, "metavar": metavar}
    if _is_dict(tp):
        return {"action": "append", "type": key_value(flag), "metavar": "KEY=VALUE"}
    if str in typing.get_args(tp):  # a path or name here, an object through the Python API
        return {"type": str, "metavar": metavar}
    raise TypeError(f"{f.name}: no flag for type {tp}; give the field a metadata 'flag' of None "
                    "(and say why in its doc) or a type with a string form")


def _help(doc: str, f: dataclasses.Field) -> str:
    text = first_sentence(doc)
    shown = f.default not in (dataclasses.MISSING, None) and not isinstance(f.default, bool)
    return f"{text.removesuffix('.')} (default: {f.default})" if shown else text


def _without_none(tp: Any) -> Any:
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return tp
    rest = tuple(a for a in typing.get_args(tp) if a is not type(None))
    return rest[0] if len(rest) == 1 else Union[rest]


def _is_dict(tp: Any) -> bool:
    tp = _without_none(tp)
    return tp is dict or typing.get_origin(tp) is dict
