"""Warm-start points: known configs a search tries first, so the sampler starts from them.

`SEED_SETTINGS` (`warm_start: seeds`) are two commonly recommended fast settings: bf16 mixed
precision with batch 64 at full width, and bf16 with batch 128 and every layer's channels
halved. A point only names the knobs it cares about; the others are filled from the fixed
settings (or the domain's first value), since every point must give every searched knob.
"""

from __future__ import annotations

from typing import Any

from ray.tune.search.sample import Categorical, Domain, Float, Integer

SEED_SETTINGS: list[dict[str, Any]] = [
    {"precision": "bf16-mixed", "batch_size": 64, "width": 1.0},  # mixed precision, batch 64
    {"precision": "bf16-mixed", "batch_size": 128, "width": 0.5},  # channels halved
]


def _contains(domain: Domain, value: Any) -> bool:
    if isinstance(domain, Categorical):
        return value in domain.categories
    if isinstance(domain, Integer):
        return isinstance(value, int) and domain.lower <= value < domain.upper
    if isinstance(domain, Float):
        return isinstance(value, (int, float)) and domain.lower <= value <= domain.upper
    return False


def _describe(domain: Domain) -> str:
    """'one of [32, 64]' or '[0.001, 0.1]': what a value must be, in the user's terms."""
    if isinstance(domain, Categorical):
        return f"one of {list(domain.categories)}"
    if isinstance(domain, (Integer, Float)):
        return f"[{domain.lower}, {domain.upper}{')' if isinstance(domain, Integer) else ']'}"
    return str(domain)


def _fill(domain: Domain, preferred: Any) -> Any:
    if preferred is not None and _contains(domain, preferred):
        return preferred
    if isinstance(domain, Categorical):
        return domain.categories[0]
    return domain.lower


def warm_start_points(warm_start: str | list | None, searched: dict[str, Domain],
                      base: dict[str, Any]) -> list[dict[str, Any]]:
    """Complete, validated points for `OptunaSearch(points_to_evaluate=...)`."""
    if not warm_start or not searched:
        return []
    if warm_start == "seeds":
        # The known settings, reduced to the searched knobs and to values the space offers.
        raw = [{k: v for k, v in p.items() if k in searched and _contains(searched[k], v)}
               for p in SEED_SETTINGS]
    else:
        raw = list(warm_start)
        for point in raw:
            for knob, value in point.items():
                if knob not in searched:
                    raise ValueError(f"warm_start point {point}: {knob!r} is not a searched knob "
                                     f"(searched: {sorted(searched)})")
                if not _contains(searched[knob], value):
                    raise ValueError(f"warm_start point {point}: {knob}={value!r} is outside "
                                     f"the space ({_describe(searched[knob])})")
    points = []
    for point in raw:
        full = {k: point.get(k, _fill(d, base.get(k))) for k, d in searched.items()}
        if full not in points:
            points.append(full)
    return points
