"""YAML read as people write it: `1e-3` is a number (and in `--set` values, `none` is null).

PyYAML implements YAML 1.1, whose float pattern needs a dot and a signed exponent (`1.0e-3`),
so `lr: 1e-3` arrives as the string '1e-3'. This loader keeps safe_load's plain-data-only rule
and adds a resolver that reads every exponent form as a float.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class PlainLoader(yaml.SafeLoader):
    """yaml.SafeLoader whose floats include `1e-3`, `2E5`, `-1.5e+2`."""


# Resolvers are looked up by first character, so the copy below must list every one a float
# can start with. Copy the dict first: SafeLoader's own table must stay unchanged.
PlainLoader.yaml_implicit_resolvers = {
    key: list(value) for key, value in yaml.SafeLoader.yaml_implicit_resolvers.items()}
PlainLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)
                 |[-+]?(?:[0-9][0-9_]*)?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                 |[-+]?\.(?:inf|Inf|INF)
                 |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))



def load(text: str) -> Any:
    """yaml.safe_load with exponent-form numbers read as floats."""
    return yaml.load(text, Loader=PlainLoader)  # noqa: S506 - PlainLoader is a SafeLoader


def load_value(text: str) -> Any:
    """One `--set KEY=VALUE` value: as `load`, and `none` (any case) is null, as Python users
    write `--set patch_size=none` for "no crop". Only here: in a spec file `baseline: none` is
    the word 'none' (no baseline), and null is spelled `null` or `~`."""
    if text.strip().lower() == "none":
        return None
    return load(text)
