"""Speed-only switches picked by measurement at the start of a trial, not by search trials.

Some switches change how fast a step runs but not what it computes: the memory layout
(`channels_last`), `torch.compile` (and its mode) and cuDNN's algorithm search
(`cudnn_benchmark`). A search trial spent on one of them buys a timing that a few steps measure
as well, so each trial times a few training steps per candidate value and trains with the
fastest (issue 17, item 4).

What is learned is untouched: every candidate runs on its own freshly built model and optimizer
(thrown away after), on a batch of the validation feed, and `fit` then builds the trial's model
from the seed as always. So a profiled trial trains exactly as an unprofiled one given the same
picks (tests/trainables/test_profile.py checks the weights).

Rules (each a why):
* Candidates are timed one switch at a time, the others at the picks so far, the config's own
  value first (a tie keeps it): 2-3 candidates per switch instead of their product.
* `WARMUP_STEPS` untimed steps per candidate (first kernels, allocator growth, compilation),
  then `TIMED_STEPS` timed ones, each synced: the steady time per step is their median (a step
  that lost its core to another process on a shared machine says nothing about the candidate).
* torch.compile is judged by its steady step time plus its one-off cost (the warm-up steps'
  time beyond steady steps: the compilation) spread over the trial's planned steps, i.e. by
  the trial's estimated training time `one_off + steady x planned steps`. A compile that costs
  tens of seconds on CPU only wins a trial long enough to pay it back. Other candidates are
  judged by steady time alone: their first steps also pay process-wide first-call costs that
  would count against whichever candidate runs first.
* A setting is timed once: the config's own value of a later switch, at the picks so far, is
  often a setting an earlier switch already timed.
* Timing stops where it cannot pay back within the trial: after each switch, when timing the
  alternatives left (at what each one has cost so far) would take more than `SHARE` of the
  trial's estimated training time, the switches left keep the config's own values. A pick
  saves part of a step, so a profile costing more than half the training cannot earn its time.
  The config's own values and the first switch are always timed: the first measurement also
  pays the process's first-call costs, which say nothing about what an alternative costs. On a
  GPU each new layout is a new cuDNN algorithm search (about 1.3 s for a small model on an
  H200): profiles of 7.5-12.7 s against 0.6 s of training, measured (docs/benchmarks.md).
* Several workers each time their own candidates (no collectives: the unwrapped model) and sum
  the estimates with `all_reduce`, so every rank makes the same pick.
* A candidate that runs out of memory ends the trial (`infeasible` by `status_of`): the search
  learns that this configuration does not fit, without a full trial. Any other error in an
  alternative candidate only drops it (a compiler missing here must not fail the trial); an
  error with the config's own values is the trial's own error, raised as it would be without
  a profile (a model builder that fails must not be hidden by a second build that works).

Not profiled: on CPU `cudnn_benchmark` and `pin_memory` do nothing (no cuDNN, no
host-to-device copy). The data-side switches (`pin_memory`, `cache_shard`,
`prefetch_batches`) shape the feed, built once per trial, and `cache_shard`'s one-off read of
the whole shard cannot be timed in a few steps: they stay as configured (or searched).
"""

from __future__ import annotations

import dataclasses
import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.loop.fit import TrainStep
from trainables.loop.io import LoopIO
from trainables.loop.switches import memory_format_for, sync
from trainables.loop.task import task_for
from trainables.status import is_out_of_memory

# Switches the profile may pick (the `profile` of a trial plan is a subset of these).
PROFILED = ("channels_last", "compile", "cudnn_benchmark")
# Report key prefix of a pick ("pick.channels_last"): the leaderboard column and MLflow tag.
PICK_PREFIX = "pick."
# Report key of the trained config's steady step, timed before training (by the profile, or by
# `time_step` for a confirmation with nothing to profile).
START_STEP = "start_step_s"
WARMUP_STEPS = 2
TIMED_STEPS = 5
# The most of a trial's estimated training time that the switches after the first may cost.
SHARE = 0.5


@dataclass(frozen=True)
class Timing:
    step_s: float
    """Steady seconds per training step."""
    one_off_s: float
    """What the warm-up steps cost beyond steady steps (compilation, first kernels)."""
    peak_mb: float = math.nan
    """Peak memory of training: CUDA's allocator high-water mark; on CPU the weights, their
    gradients and AdamW's two moments plus the activations one step saves for backward."""


Measure = Callable[[TrialConfig], Timing]


@dataclass
class Profile:
    picks: dict[str, Any]
    """Switch -> the value the trial trains with."""
    seconds: float
    """Wall time of the whole profile (reported as `profile_s`, outside `train_time_s`)."""
    estimates: dict[str, float] = dataclasses.field(default_factory=dict)
    """'switch=value' -> its estimated cost (seconds of training), for the curious."""
    untimed: tuple[str, ...] = ()
    """Switches left at the config's own values: timing them could not pay back (`SHARE`)."""
    step_s: float = math.nan
    """The picked config's steady seconds per step, as this worker timed it."""

    def apply(self, cfg: TrialConfig) -> TrialConfig:
        return dataclasses.replace(cfg, **self.picks)

    def metrics(self) -> dict[str, Any]:
        step = {START_STEP: self.step_s} if math.isfinite(self.step_s) else {}
        return {"profile_s": self.seconds, **step,
                **{PICK_PREFIX + k: v for k, v in self.picks.items()}}


def switches_to_profile(mode: str, pinned: set[str], base: dict[str, Any]) -> tuple[str, ...]:
    """The switches a search's trials profile. mode 'off': none; 'on': every profiled switch
    except compile; 'compile': compile too. `pinned`: switches the user fixed (`--set`, `base`)
    or the space searches: their value wins, never profiled. Compile is also profiled when the
    trial's config asks for it (`compile: true` from a space's fixed values)."""
    if mode == "off":
        return ()
    allowed = [s for s in PROFILED if s not in pinned]
    if mode != "compile" and not base.get("compile", False):
        allowed = [s for s in allowed if s != "compile"]
    return tuple(allowed)


def candidates(cfg: TrialConfig, meta: DataMeta, device: torch.device,
               switches: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    """Switch -> the settings to time, the config's own first. Only where the switch can
    matter on this device and data."""
    out: dict[str, list[dict[str, Any]]] = {}

    def own_first(name: str, values: list[dict[str, Any]]) -> None:
        own = [v for v in values if all(getattr(cfg, k) == x for k, x in v.items())]
        out[name] = own + [v for v in values if v not in own]

    if "channels_last" in switches and meta.spatial_dims in (2, 3):  # no NLC/NC layout
        own_first("channels_last", [{"channels_last": False}, {"channels_last": True}])
    if "compile" in switches:
        # reduce-overhead (CUDA graphs) only on CUDA; max-autotune's minutes of tuning never
        # pay off in a profile. A mode other than the default was chosen (--set compile_mode,
        # or the space): only that one is timed.
        modes = ["default"] + (["reduce-overhead"] if device.type == "cuda" else [])
        if cfg.compile_mode != "default":
            modes = [cfg.compile_mode]
        own_first("compile", [{"compile": False}]
                  + [{"compile": True, "compile_mode": m} for m in modes])
    if "cudnn_benchmark" in switches and device.type == "cuda":  # no cuDNN on CPU
        own_first("cudnn_benchmark", [{"cudnn_benchmark": True}, {"cudnn_benchmark": False}])
    return out


def profile(cfg: TrialConfig, meta: DataMeta, io: LoopIO, switches: tuple[str, ...],
            measure: Measure | None = None) -> Profile:
    """Time the candidates of `switches` and return the picks. `measure` (cfg -> Timing) is
    injectable for tests; by default it trains a few steps of a throwaway model."""
    started = time.perf_counter()
    sets = candidates(cfg, meta, io.device, switches)
    if not sets:
        return Profile({}, 0.0)
    if measure is None:
        batch = _profile_batch(io, cfg.per_worker_batch)
        if batch is None:  # nothing to time with: train with the config's own values
            return Profile({}, time.perf_counter() - started)
        measure = StepTimer(meta, io, batch)
    planned = max(1, io.steps_per_epoch) * cfg.epochs
    picks: dict[str, Any] = {}
    estimates: dict[str, float] = {}
    timed: list[tuple[TrialConfig, Timing]] = []
    spent = [0.0, 0]  # this worker's time and count timing alternatives (not `cfg`)
    untimed: tuple[str, ...] = ()
    ordered = list(sets.items())
    for index, (name, values) in enumerate(ordered):
        costs = _costs(cfg, picks, values, measure, timed, planned, spent)
        # Summed over the workers: every rank makes the same picks and the same stop.
        total = io.all_reduce(torch.tensor([*costs, *spent, 1.0], dtype=torch.float64,
                                           device=io.device)).tolist()
        total, (spent_all, measured_all, workers) = total[:-3], total[-3:]
        best = min(range(len(total)), key=total.__getitem__)  # a tie keeps the config's own
        for value, cost in zip(values, total):
            estimates[",".join(f"{k}={v}" for k, v in value.items())] = cost
        picks.update(values[best])
        left = sum(len(vs) - 1 for _, vs in ordered[index + 1:])
        if left and measured_all and \
                spent_all / measured_all * left > SHARE * total[best] / workers:
            untimed = tuple(n for n, _ in ordered[index + 1:])
            break
    if any(v.get("compile") for vs in sets.values() for v in vs):
        torch._dynamo.reset()  # the trial compiles its own model from a clean slate
    picked = dataclasses.replace(cfg, **picks)
    step_s = next((t.step_s for c, t in timed if c == picked), math.nan)
    return Profile(picks, time.perf_counter() - started, estimates, untimed, step_s)


def _costs(cfg: TrialConfig, picks: dict, values: list[dict], measure: Measure,
           timed: list[tuple[TrialConfig, Timing]], planned: int, spent: list) -> list[float]:
    """Each value's estimated training time (inf where it failed), the picks so far applied;
    a setting timed before is not timed again (`timed` grows), and what timing alternatives
    costs is added to `spent` ([seconds, count])."""
    costs, errors = [], []
    for value in values:
        trial = dataclasses.replace(cfg, **{**picks, **value})
        known = next((t for c, t in timed if c == trial), None)
        t0 = time.perf_counter()
        try:
            t = known if known is not None else measure(trial)
        except Exception as err:  # noqa: BLE001 - judged below
            if is_out_of_memory(err):
                raise  # the configuration does not fit: infeasible, no full trial
            if value is values[0]:
                # The config's own value: the trial would fail the same way without a profile
                # (a model that cannot be built), so it fails now, as it would.
                raise
            errors.append(err)
            costs.append(math.inf)
            continue
        finally:
            if known is None and trial != cfg:
                spent[0], spent[1] = spent[0] + time.perf_counter() - t0, spent[1] + 1
        if known is None:
            timed.append((trial, t))
        # The trial's training time if it trained with this value (see the module doc).
        costs.append(t.step_s * planned + (t.one_off_s if trial.compile else 0.0))
    if len(errors) == len(values):
        raise errors[0]
    return costs


def time_step(cfg: TrialConfig, meta: DataMeta, io: LoopIO) -> float | None:
    """`cfg`'s steady seconds per step, timed as the profile times a candidate (None: no
    batch to time with)."""
    batch = _profile_batch(io, cfg.per_worker_batch)
    return None if batch is None else StepTimer(meta, io, batch)(cfg).step_s


def _profile_batch(io: LoopIO, batch: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """One training-sized batch from the validation feed: same shapes and labels as training
    data, and the training feed is untouched (its one-off cache read stays in epoch 1's time,
    and no training sample is drawn early)."""
    xs, ys, n = [], [], 0
    batches = io.val_batches()
    try:
        for x, y in batches:
            xs.append(x)
            ys.append(y)
            n += len(y)
            if n >= batch:
                break
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()  # a streaming iterator's prefetch thread stops now
    if not xs:
        return None
    x, y = torch.cat(xs), torch.cat(ys)
    if len(y) < batch:
        # A validation set smaller than the batch (unet3d's is one 64^3 volume) would time
        # steps of fewer samples than training takes, where the layouts' ranking differs
        # (measured: at batch 1 channels_last won 3 of 6 profiles, at the real batch 6 of 6).
        # A timing needs the shape, not distinct samples: repeat them.
        reps = -(-batch // len(y))
        x, y = x.repeat(reps, *[1] * (x.dim() - 1)), y.repeat(reps, *[1] * (y.dim() - 1))
    return x[:batch].to(io.device), y[:batch].to(io.device)


class StepTimer:
    """Times training steps of a fresh model built for a candidate config (then dropped).
    `data_parallel`: wrap the model as the trial would (DDP over the worker group), so the
    timing includes the gradient all-reduce (the search's screen); off for the profile, whose
    ranks time their own candidates without collectives."""

    def __init__(self, meta: DataMeta, io: LoopIO, batch: tuple[torch.Tensor, torch.Tensor],
                 data_parallel: bool = False):
        self.meta, self.io, self.batch = meta, io, batch
        self.data_parallel = data_parallel

    def __call__(self, cfg: TrialConfig) -> Timing:
        io, device = self.io, self.io.device
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = cfg.cudnn_benchmark  # fit sets the trial's own
        memory_format = memory_format_for(cfg, self.meta)
        task = io.task or task_for(cfg.workload, self.meta.task)
        model = task.model(cfg, self.meta).to(device,
                                                                memory_format=memory_format)
        weights_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        if self.data_parallel:
            model = io.wrap_model(model)
        if cfg.compile:
            model = torch.compile(model, mode=cfg.compile_mode)
        step = TrainStep.build(cfg, model, io, task, self.meta.task, memory_format)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        x, y = self.batch
        try:
            t0 = time.perf_counter()
            for _ in range(WARMUP_STEPS):
                step(x, y, True)  # the first measures activation_mb (its meter is untimed)
            sync(device)
            t1 = time.perf_counter()
            times = []
            for _ in range(TIMED_STEPS):
                t = time.perf_counter()
                step(x, y, True)
                sync(device)  # per step: the median below needs each step's own time
                times.append(time.perf_counter() - t)
            peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" \
                else 4 * weights_mb + (step.activation_mb or 0.0)
        finally:
            del model, step
            if device.type == "cuda":
                # The next candidate's peak and fit are read off the device allocator: free
                # what this one held, cycles too. Host memory needs no collection: a model and
                # its step are freed by their references, and a full collection of a process
                # holding torch and Ray took 0.12-0.2 s, a third of a screen's time per
                # candidate on a CPU (docs/benchmarks.md).
                gc.collect()
                torch.cuda.empty_cache()
        # The median, not the mean: a step that lost its core to another process (a shared
        # machine) says nothing about the candidate.
        steady = statistics.median(times)
        return Timing(steady, max(0.0, (t1 - t0) - WARMUP_STEPS * steady), peak)
