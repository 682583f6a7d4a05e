"""What a search checks before any work starts, and the header that says what it will run.

`prepare` reads the spec's data, resolves the space, pins the user's fixed settings, fits the
space to the data and sizes trials to the hardware: every refusal here is bad input
(`InputError`), raised before a trial or an MLflow run exists. `search --check` runs the same
checks without Ray (orchestrator/preflight.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

from orchestrator import resources
from orchestrator.baseline import lr_line, settings_of
from orchestrator.errors import InputError
from orchestrator.machine import cpu_model
from orchestrator.spec import SearchSpec
from orchestrator.task_check import check_task
from search_spaces import SpaceContext, check_space, domain_values, resolve_space
from search_spaces.inputs import check_inputs, default_patch
from search_spaces.pin import describe_pinned, pin
from search_spaces.steps import fit_batch_to_shards
from search_spaces.warm_start import warm_start_points
from trainables.data.arrays import ArrayData, DataError, with_spatial_dims
from trainables.loop.lr import from_baseline
from trainables.loop.profile import PROFILED, switches_to_profile
from trainables.workloads import workload_data

# What validation raises for input it refuses (DataError: a data file that does not read).
REFUSALS = (ValueError, DataError, FileNotFoundError)


@dataclass(frozen=True)
class Prepared:
    """A spec checked against its data and the hardware: what every stage runs with."""

    data: ArrayData
    searched: dict[str, Any]
    """The searched knobs and their domains (Tune search-space objects)."""
    base: dict[str, Any]
    """Fixed trial settings: the spec's `base`, the space's fixed values, defaults fitted to
    the data (a patch that fits)."""
    plan: resources.ResourcePlan
    pinned: Any
    """Knobs the space searched that the user fixed (`base`), reported in the header."""
    notes: tuple[str, ...] = ()
    """What was changed to fit (batch sizes dropped), said once every check has passed."""


def load_data(spec: SearchSpec) -> ArrayData:
    """The spec's arrays, read with its `spatial_dims` (None: inferred from the shape); a file
    that does not read is an `InputError`."""
    try:
        return with_spatial_dims(spec.arrays or workload_data(spec.workload, spec.data),
                                 spec.spatial_dims)
    except REFUSALS as err:
        raise InputError(str(err)) from err


def prepare(spec: SearchSpec, data: ArrayData, total_cpus: int, total_gpus: int,
            worker_cpus: int | None = None) -> Prepared:
    """Resolve and check the space against the hardware and data: every error before any
    trial, as an `InputError`."""
    try:
        prepared = _prepare(spec, data, total_cpus, total_gpus, worker_cpus)
    except InputError:
        raise
    except REFUSALS as err:
        raise InputError(str(err)) from err
    for line in prepared.notes:  # only now: refused input gets its one line, nothing else
        print(line, file=sys.stderr)
    return prepared


def _prepare(spec, data, total_cpus, total_gpus, worker_cpus) -> Prepared:
    bf16 = cpu_model()[1]  # the driver's CPU stands for the trials' (a GPU trial has it anyway)
    probe_ctx = SpaceContext(use_gpu=total_gpus > 0, native_bf16=bf16,
                             cpus_per_trial=spec.cpus_per_trial or total_cpus,
                             gpus_per_trial=max(total_gpus, 1),
                             image_size=data.image_size, workload=spec.workload,
                             spatial_dims=data.spatial_dims)
    searched, fixed = resolve_space(spec.space, probe_ctx)
    searched, fixed, pinned = pin(searched, fixed, spec.base)
    base = default_patch({**spec.trial_base(), **fixed}, searched, data)
    notes: list[str] = []
    baseline = settings_of(spec, base)
    if baseline is not None:  # the trials' lr from the baseline's: the run the user tuned
        anchored = from_baseline(base, baseline)
        if anchored is not base:
            base = anchored
            notes.append(lr_line(anchored))
    check_inputs(spec.num_trials, searched, data)
    if spec.task is not None or spec.model is not None:  # yours: tried on a tiny batch now
        note = check_task(spec.resolved_task(data.meta().task), data, base)
        notes += [note] if note else []
    plan = resources.plan(total_cpus, total_gpus, cpus_per_trial=spec.cpus_per_trial,
                          max_concurrent=spec.max_concurrent_trials,
                          max_workers=max(worker_counts(searched, base)),
                          worker_cpus=worker_cpus)
    ctx = SpaceContext(use_gpu=plan.use_gpu, native_bf16=bf16,
                       cpus_per_trial=plan.cpus_per_trial,
                       gpus_per_trial=max(plan.gpus_per_trial, 1), image_size=data.image_size,
                       workload=spec.workload, spatial_dims=data.spatial_dims)
    check_space(searched, base, ctx)
    # Batch sizes that would train 0 steps: dropped with a note, or refused (search_spaces.steps).
    searched = fit_batch_to_shards(searched, base, len(data.x_train), note=notes.append)
    warm_start_points(spec.warm_start, searched, base)  # a bad point fails before any trial
    return Prepared(data, searched, base, plan, pinned, tuple(notes))


def worker_counts(searched: dict, base: dict) -> list[int]:
    """Every worker count a trial of this search may have."""
    if "workers" in searched:
        return list(domain_values(searched["workers"]))
    return [base.get("workers", 1)]


def describe_space(searched: dict) -> dict[str, Any]:
    """Each domain as the written form a spec file uses: {'choice': [...]}, or a sampler's name
    with its bounds ({'loguniform': [0.001, 0.1]})."""
    out: dict[str, Any] = {}
    for knob, domain in searched.items():
        if hasattr(domain, "categories"):
            out[knob] = {"choice": list(domain.categories)}
        elif hasattr(domain, "lower"):
            sampler = type(getattr(domain, "sampler", None)).__name__.lstrip("_").lower()
            name = {"loguniform": "loguniform", "normal": "normal"}.get(sampler, "uniform")
            kind = "randint" if type(domain).__name__ == "Integer" else name
            out[knob] = {kind: [domain.lower, domain.upper]}
        else:
            out[knob] = str(domain)
    return out


def profile_switches(spec: SearchSpec, searched: dict, base: dict) -> tuple[str, ...]:
    """What each trial profiles: a switch the user pinned (`--set`, `base`) or the space
    searches keeps the user's value and is not profiled."""
    return switches_to_profile(spec.profile, set(spec.base) | set(searched), base)


def describe_profile(spec: SearchSpec, searched: dict, base: dict, use_gpu: bool) -> str:
    if spec.profile == "off":
        return "profile: off (speed-only switches as configured)"
    if base.get("loop") == "legacy" and "loop" not in searched:
        return "profile: none (the legacy loop keeps its habits)"
    # cuDNN's algorithm search exists only on a GPU: a CPU trial never times it.
    switches = [s for s in profile_switches(spec, searched, base)
                if use_gpu or s != "cudnn_benchmark"]
    line = (f"profile: {', '.join(switches) or 'nothing'} picked by timing a few steps at "
            "each trial's start (where the data has a channels-last layout)" if switches else
            "profile: nothing to time here")
    kept = [s for s in PROFILED if s in spec.base or s in searched]
    return line + (f"; not profiled, your value wins: {', '.join(kept)}" if kept else "")


def print_space(prepared: Prepared, spec: SearchSpec, out: TextIO) -> None:
    """The header's space lines, the same for a search and for `search --check`."""
    print(f"  space: {describe_space(prepared.searched)}", file=out)
    if prepared.pinned:
        print(f"  {describe_pinned(prepared.pinned, spec.base)}", file=out)
    print(f"  {describe_profile(spec, prepared.searched, prepared.base, prepared.plan.use_gpu)}",
          file=out)
