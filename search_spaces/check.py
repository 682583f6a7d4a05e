"""Feasibility checks of a space against the hardware and data, before any trial is launched.

A combination that cannot run is an error that names the knob and the fix, never a failed trial.
"""

from __future__ import annotations

from typing import Any

from ray.tune.search.sample import Categorical, Domain, Float, Integer

from search_spaces.context import SpaceContext
from trainables.config import TrialConfig
from trainables.fields import check_value, describe, hints, matches
from trainables.workloads import WORKLOADS, family


def domain_values(domain: Any) -> list:
    """Every value of a categorical domain, the bounds of a numeric one, a fixed value itself."""
    if isinstance(domain, Categorical):
        return list(domain.categories)
    if isinstance(domain, Integer):
        return [domain.lower, domain.upper - 1]
    if isinstance(domain, Float):
        return [domain.lower, domain.upper]
    return [domain]


def check_space(space: dict, base: dict, ctx: SpaceContext) -> None:
    """Raise ValueError naming the knob and the fix for anything that could not run."""
    known = set(TrialConfig.field_names())
    unknown = sorted(set(space) - known)
    if unknown:
        raise ValueError(f"space has unknown knob(s) {unknown}; knobs are TrialConfig fields: "
                         f"{sorted(known)}")
    for knob, domain in space.items():
        if not isinstance(domain, Domain):
            raise ValueError(f"space knob {knob!r} must be a Ray Tune domain (tune.choice, ...)")
        if isinstance(domain, Categorical) and not domain.categories:
            raise ValueError(f"space knob {knob!r} has an empty choice list")
        check_domain_types(knob, domain)
    # Every fixed setting and one sample of the space must make a valid TrialConfig (types
    # first: the comparisons below need numbers).
    TrialConfig.from_dict({**base, **{k: domain_values(d)[0] for k, d in space.items()}})

    def values(knob: str) -> list:
        return domain_values(space[knob]) if knob in space else [base.get(knob, _default(knob))]

    for value in values("precision"):
        if value == "fp16-mixed" and not ctx.use_gpu:
            raise ValueError("knob 'precision': fp16-mixed needs a CUDA GPU (on CPU its backward "
                             "is far slower than fp32); remove it or use bf16-mixed")
    for workload in values("workload"):
        if workload not in WORKLOADS and workload != "custom" and ":" not in str(workload):
            raise ValueError(f"workload {workload!r} is unknown; built-in: {sorted(WORKLOADS)}, "
                             "or your own model as module:function")
    patches = [p for p in values("patch_size") if p is not None]
    if ctx.spatial_dims == 0 and patches:
        raise ValueError(f"knob 'patch_size': {patches} but the data are feature vectors "
                         "(nothing to crop); use patch_size none or leave it out")
    volumes = any(family(w) == "unet3d" for w in values("workload"))
    if volumes and None in values("patch_size"):
        raise ValueError("knob 'patch_size': unet3d trains on patches; give a multiple of 4")
    if volumes and [p for p in patches if p % 4]:
        raise ValueError(f"knob 'patch_size': unet3d needs multiples of 4 (two poolings), got "
                         f"{[p for p in patches if p % 4]}")
    too_big = [p for p in patches if p > ctx.image_size]
    if too_big:
        raise ValueError(f"knob 'patch_size': {too_big} larger than the samples' smallest side "
                         f"{ctx.image_size}; use values <= {ctx.image_size}")
    if family(ctx.workload) == "unet3d":
        odd = [p for p in values("patch_size") if p % 4]
        if odd:
            raise ValueError(f"knob 'patch_size': {odd} not multiples of 4; the 3D UNet pools "
                             "twice, so use e.g. 16, 24 or 32")
    too_many = [w for w in values("workers") if w > ctx.max_workers]
    if too_many:
        unit = "GPUs" if ctx.use_gpu else "CPUs"
        raise ValueError(f"knob 'workers': {too_many} more than the {ctx.max_workers} {unit} a "
                         f"trial gets; use values <= {ctx.max_workers} or give trials more {unit}")
    if min(values("batch_size")) < max(values("workers")):
        raise ValueError(f"knob 'batch_size': smallest value {min(values('batch_size'))} is below "
                         f"the largest 'workers' {max(values('workers'))}; every worker needs at "
                         "least one sample per batch")


def check_domain_types(knob: str, domain: Domain) -> None:
    """Every choice of a knob has the knob's type; a float range never feeds an integer knob."""
    tp = hints(TrialConfig)[knob]
    if isinstance(domain, Categorical):
        for choice in domain.categories:
            check_value(f"space knob {knob!r}", choice, tp)
    elif isinstance(domain, Float) and not matches(0.5, tp):
        raise ValueError(f"space knob {knob!r} wants {describe(tp)}; a float range (uniform, "
                         "loguniform, quniform) gives fractions: use randint or a choice list")
    elif isinstance(domain, Integer) and not matches(1, tp):
        raise ValueError(f"space knob {knob!r}: expected {describe(tp)}, not an integer "
                         "range")


def _default(knob: str) -> Any:
    return getattr(TrialConfig(), knob)
