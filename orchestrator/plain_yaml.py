"""YAML read as people write it: `1e-3` is a number, `none` is null.

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

# `none` / `None` read as null too: Python users write `--set patch_size=none` for "no crop".
PlainLoader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:none|None|NONE)$"),
                                  list("nN"))


def load(text: str) -> Any:
    """yaml.safe_load with exponent-form numbers read as floats."""
    return yaml.load(text, Loader=PlainLoader)  # noqa: S506 - PlainLoader is a SafeLoader
