"""Turn a space written in a spec file (plain YAML/JSON data) into Ray Tune domains.

    space:
      precision: [fp32, bf16-mixed]          # a list is a categorical choice
      lr: {loguniform: [1.0e-4, 1.0e-2]}
      batch_size: {choice: [64, 128, 256]}
      width: {uniform: [0.5, 2.0]}
      accum_steps: {randint: [1, 4]}         # integers lo..hi inclusive
      epochs: 4                              # a scalar fixes the knob

Only these plain forms are accepted: a spec file can never construct arbitrary objects.
"""

from __future__ import annotations

from typing import Any

from ray import tune

FORMS = ("choice", "uniform", "loguniform", "randint", "quniform")


def parse_domain(knob: str, spec: Any):
    """One knob's domain; a scalar is returned unchanged (a fixed value)."""
    if isinstance(spec, list):
        spec = {"choice": spec}
    if not isinstance(spec, dict):
        return spec
    if len(spec) != 1 or next(iter(spec)) not in FORMS:
        raise ValueError(f"space knob {knob!r}: write one of {list(FORMS)} "
                         f"(e.g. {{choice: [a, b]}}), got {spec!r}")
    form, args = next(iter(spec.items()))
    if form == "choice":
        if not isinstance(args, list) or not args:
            raise ValueError(f"space knob {knob!r}: choice needs a non-empty list of values")
        return tune.choice(args)
    if not isinstance(args, list) or len(args) != (3 if form == "quniform" else 2):
        raise ValueError(f"space knob {knob!r}: {form} needs [low, high]"
                         + (", q]" if form == "quniform" else ""))
    low, high = args[0], args[1]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in args):
        raise ValueError(f"space knob {knob!r}: {form} bounds must be numbers, got {args}")
    if form == "randint":
        if not (isinstance(low, int) and isinstance(high, int)) or high < low:
            raise ValueError(f"space knob {knob!r}: randint needs integers low <= high, got {args}")
        return tune.randint(low, high + 1)  # inclusive upper bound: what people write
    if not low < high:
        raise ValueError(f"space knob {knob!r}: empty range {args}; {form} needs low < high")
    if form == "loguniform":
        if low <= 0:
            raise ValueError(f"space knob {knob!r}: loguniform needs low > 0, got {low}")
        return tune.loguniform(low, high)
    if form == "quniform":
        return tune.quniform(low, high, args[2])
    return tune.uniform(low, high)


def parse_space(raw: dict[str, Any]) -> tuple[dict, dict]:
    """Split a written space into (searched domains, fixed values)."""
    if not isinstance(raw, dict):
        raise ValueError(f"space must be a mapping of knob -> values, got {type(raw).__name__}")
    searched, fixed = {}, {}
    for knob, spec in raw.items():
        domain = parse_domain(str(knob), spec)
        (searched if isinstance(domain, tune.search.sample.Domain) else fixed)[knob] = domain
    return searched, fixed
