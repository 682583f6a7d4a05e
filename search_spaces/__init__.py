"""Search spaces: compute-free definitions of what a search may try.

`SPACES` is a plain registry of name -> function(SpaceContext) -> {knob: Ray Tune domain}. A
user's own space plugs in as a `module:function` path, a dict written in a spec file, or a
function passed through the Python API.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from search_spaces.check import check_space, domain_values
from search_spaces.context import SpaceContext
from search_spaces.default import compact_space, default_space, pipeline_space, small_space
from search_spaces.parse import parse_space

SpaceFn = Callable[[SpaceContext], dict]

SPACES: dict[str, SpaceFn] = {
    "default": default_space,
    "compact": compact_space,
    "small": small_space,
    "pipeline": pipeline_space,
}


def load_function(path: str, what: str) -> Callable:
    """Import `module:function`, with an error that says which part is wrong."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{what} {path!r} must be a registered name or 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"{what} {path!r}: cannot import module {module_name!r} ({err})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{what} {path!r}: module {module_name!r} has no function {attr!r}")
    return fn


def resolve_space(space: str | dict | SpaceFn, ctx: SpaceContext) -> tuple[dict, dict]:
    """(searched domains, fixed values) from a registered name, a path, a written dict or a function."""
    if isinstance(space, dict):
        return parse_space(space)
    if isinstance(space, str):
        if space in SPACES:
            fn = SPACES[space]
        elif ":" in space:
            fn = load_function(space, "space")
        else:
            raise ValueError(f"unknown space {space!r}; known: {sorted(SPACES)} or 'module:function'")
    elif callable(space):
        fn = space
    else:
        raise ValueError(f"space must be a name, a dict or a function, got {type(space).__name__}")
    try:
        result = fn(ctx)
    except TypeError as err:  # not a space function: it does not take a SpaceContext
        raise ValueError(f"space function {space!r} cannot be called with a SpaceContext: "
                         f"{err}") from None
    if not isinstance(result, dict):
        raise ValueError(f"space function {fn!r} must return a dict of knob -> domain")
    return parse_space(result)  # a function may also return the written forms (lists, dicts)


__all__ = ["SPACES", "SpaceContext", "check_space", "domain_values", "load_function",
           "resolve_space"]
