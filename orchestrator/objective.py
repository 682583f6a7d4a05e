"""Objectives: how one number (or a pair, for Pareto) is made from a trial's accuracy and time.

An objective is called on every epoch's metrics of a trial, in order, with a per-trial `state`
dict it may keep between calls; it returns the metrics with its value(s) added. Time is always
`train_time_s`: the time inside the workers' training steps, without Ray start-up, data upload,
validation or teardown. Accuracy is `val_score`: validation accuracy for classifiers, foreground
Dice for segmentation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from orchestrator.curves import first_at
from trainables.loop.state import validated
from trainables.status import FAILED_STATUSES

ACCURACY, TIME = "val_score", "train_time_s"

# A trial that diverged or could not run scores below anything a real trial can score, so
# Optuna learns to avoid its region (TPE ranks values; the size of the gap does not matter).
FAILED_SCORE = -1e9


def projected_time(metrics: dict, full_epochs: int | None = None) -> float:
    """Training time projected to the full run:

        full_run_s = warmup_s + (train_time_s - warmup_s) / epoch * N

    N is `full_epochs` (the length of the user's real training) or else the trial's planned
    epochs. The one-off warm-up (compile, first kernels, shard load: the loop's `warmup_s`) is
    paid once, not once per epoch, so a compile that a 100-epoch run amortises is not judged on
    a 3-epoch trial, and ASHA does not multiply epoch 1's warm-up by planned/epoch (issue 11.5).
    A trial that ended early on its own (early stopping, done=True) is not projected to its own
    plan: it really took this time. Accuracy is not projected (it only grows)."""
    t = max(float(metrics[TIME]), 1e-6)
    epoch, planned = metrics.get("epoch"), metrics.get("epochs_planned")
    if not epoch or not (full_epochs or planned):
        return t
    if full_epochs is None and (epoch >= planned or metrics.get("done")):
        return t
    warm = min(max(float(metrics.get("warmup_s") or 0.0), 0.0), t)
    return warm + (t - warm) / epoch * (full_epochs or planned)


def _time_columns(metrics: dict, full_epochs: int | None, baseline_s: float | None,
                  own_s: float | None = None) -> dict:
    """`full_run_s` on every trial; `speedup_vs_baseline` when a baseline ran: the baseline's
    time over this trial's (`own_s`, else its projected full run)."""
    full = projected_time(metrics, full_epochs)
    out = {"full_run_s": full}
    if baseline_s:
        mine = own_s if own_s is not None else full
        out["speedup_vs_baseline"] = baseline_s / mine if mine and mine == mine else math.nan
    return out


@dataclass(frozen=True, kw_only=True)
class WeightedObjective:
    """objective = val_score - time_weight * log2(full_run_s / reference_time_s)  (maximize)

    `full_run_s` is the trial's training time projected to the full run (`projected_time`).
    Each doubling of training time costs `time_weight` of accuracy (0.05 = 5 points), whatever
    the absolute times: a 10 s -> 5 s saving is worth as much as 100 s -> 50 s.
    `reference_time_s` only shifts every score by the same constant.
    """

    time_weight: float = 0.05
    reference_time_s: float = 10.0
    full_epochs: int | None = None
    baseline_s: float | None = None
    """The baseline's full-run time (set once the baseline ran): adds `speedup_vs_baseline`."""
    name: str = field(default="weighted", init=False)

    def __post_init__(self) -> None:
        if not self.time_weight >= 0:
            raise ValueError(f"time_weight must be >= 0 (got {self.time_weight}); "
                             "0 ranks by accuracy alone")
        if not self.reference_time_s > 0:
            raise ValueError(f"reference_time_s must be > 0 (got {self.reference_time_s})")

    metric = "objective"
    mode = "max"
    scalar = True
    stops_at_target = False
    needs_baseline = False

    @property
    def formula(self) -> str:
        return (f"objective = val_score - {self.time_weight} * "
                f"log2(full_run_s / {self.reference_time_s})  (maximize); " + _full(self))

    def __call__(self, metrics: dict, state: dict | None = None) -> dict:
        if metrics.get("status") in FAILED_STATUSES:
            return {**metrics, "objective": FAILED_SCORE}
        extra = _time_columns(metrics, self.full_epochs, self.baseline_s)
        t = extra["full_run_s"]
        value = float(metrics[ACCURACY]) - self.time_weight * math.log2(t / self.reference_time_s)
        return {**metrics, **extra, "objective": value}


# Trials that never reach the target score below this, so they rank under every trial that does.
_MISSED = -1e6


@dataclass(frozen=True, kw_only=True)
class TimeToTargetObjective:
    """MLPerf-style: training time until validation accuracy first reaches `target`.

    objective = -time_to_target_s               if the target was reached   (maximize)
              = -1e6 + 1000 * best_val_score  otherwise
    so every trial that reaches the target ranks above every trial that does not, and those
    that miss are ordered by their best accuracy.
    """

    target: float
    full_epochs: int | None = None
    baseline_s: float | None = None
    name: str = field(default="time_to_target", init=False)
    metric = "objective"
    mode = "max"
    scalar = True
    stops_at_target = True
    """Its value is fixed at the first epoch that reaches the target (orchestrator/stopper.py)."""
    needs_baseline = False

    def __post_init__(self) -> None:
        if not 0 < self.target <= 1:
            raise ValueError(f"target accuracy must be in (0, 1] (got {self.target}); "
                             "accuracy is a fraction, e.g. 0.8")

    @property
    def formula(self) -> str:
        return (f"objective = -time_to_target_s (first epoch with val_score >= {self.target});"
                " trials that never reach it: -1e6 + 1000 * best_val_score  (maximize)")

    def __call__(self, metrics: dict, state: dict | None = None) -> dict:
        if metrics.get("status") in FAILED_STATUSES:
            return {**metrics, "objective": FAILED_SCORE, "time_to_target_s": math.nan}
        state = {} if state is None else state
        curve = state.setdefault("curve", [])
        if validated(metrics):  # an epoch that skipped validation is no point of its curve
            curve.append([metrics.get("epoch", len(curve) + 1), float(metrics[ACCURACY]),
                          float(metrics[TIME])])
        best = max([0.0] + [s for _, s, _ in curve])
        point = first_at(curve, self.target)
        reached = point.seconds if point is not None else None
        value = -reached if reached is not None else _MISSED + 1000 * best
        return {**metrics, **_time_columns(metrics, self.full_epochs, self.baseline_s,
                                         reached if reached is not None else math.nan),
                "objective": value,
                "time_to_target_s": reached if reached is not None else math.nan}


@dataclass(frozen=True, kw_only=True)
class ParetoObjective:
    """Two objectives, no weights: maximize val_score, minimize train_time_s. The search
    returns the non-dominated set (no other trial is both more accurate and faster).

    Early stopping is off in this mode (ASHA needs one number to rank by), and Optuna is told
    each trial's final epoch only, so a half-trained trial can never sit on the front.
    `objective` (for sorting the table) is val_score.
    """

    full_epochs: int | None = None
    baseline_s: float | None = None
    name: str = field(default="pareto", init=False)
    metric = [ACCURACY, TIME]
    mode = ["max", "min"]
    scalar = False
    """Two values: no one number to rank by (ASHA needs one)."""
    stops_at_target = False
    needs_baseline = False

    @property
    def formula(self) -> str:
        return "pareto: maximize val_score, minimize train_time_s (non-dominated set)"

    def __call__(self, metrics: dict, state: dict | None = None) -> dict:
        if metrics.get("status") in FAILED_STATUSES:
            return {**metrics, "objective": FAILED_SCORE, ACCURACY: 0.0}
        return {**metrics, **_time_columns(metrics, self.full_epochs, self.baseline_s),
                "objective": float(metrics[ACCURACY])}


@dataclass(frozen=True, kw_only=True)
class MatchBaselineObjective:
    """Same accuracy as the baseline, in the least time:

    objective = -time_to_target_s   (first epoch with val_score >= baseline_score - tolerance)
              = -1e6 + 1000 * best_val_score   if it never gets there          (maximize)
    speedup_vs_baseline = baseline's time to the same target / this trial's.

    `baseline_score` and `baseline_s` are filled in once the baseline trial ran (orchestrator/
    baseline.py); before that the objective only knows its tolerance.
    """

    tolerance: float = 0.005
    full_epochs: int | None = None
    baseline_score: float | None = None
    baseline_s: float | None = None
    name: str = field(default="match_baseline", init=False)
    metric = "objective"
    mode = "max"
    scalar = True
    stops_at_target = True
    needs_baseline = True
    """Its target is the baseline's score: a search with this objective must run a baseline."""

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1) (got {self.tolerance}); it is "
                             "accuracy given up against the baseline, e.g. 0.005")

    @property
    def target(self) -> float:
        return max(1e-6, (self.baseline_score or 0.0) - self.tolerance)

    @property
    def formula(self) -> str:
        score = f"{self.baseline_score:.4f}" if self.baseline_score is not None else "S"
        return (f"objective = -time_to_target_s (first epoch with val_score >= baseline {score}"
                f" - {self.tolerance}); trials that never reach it: -1e6 + 1000 * "
                "best_val_score  (maximize)")

    def __call__(self, metrics: dict, state: dict | None = None) -> dict:
        inner = TimeToTargetObjective(target=min(1.0, self.target), full_epochs=self.full_epochs,
                                      baseline_s=self.baseline_s)
        return inner(metrics, state)


def _full(obj) -> str:
    n = f"N = {obj.full_epochs}" if obj.full_epochs else "N = the trial's epochs"
    return f"full_run_s = warmup_s + (train_time_s - warmup_s) / epoch * N, {n}"


OBJECTIVES = ("weighted", "time_to_target", "pareto", "match_baseline")
Objective = WeightedObjective | TimeToTargetObjective | ParetoObjective | MatchBaselineObjective


def make_objective(name: str, *, time_weight: float = 0.05, reference_time_s: float = 10.0,
                   target: float | None = None, full_epochs: int | None = None,
                   tolerance: float = 0.005) -> Objective:
    if full_epochs is not None and (not isinstance(full_epochs, int) or full_epochs < 1):
        raise ValueError(f"full_epochs must be an integer >= 1 (got {full_epochs!r})")
    if name == "weighted":
        return WeightedObjective(time_weight=time_weight, reference_time_s=reference_time_s,
                                 full_epochs=full_epochs)
    if name == "time_to_target":
        if target is None:
            raise ValueError("objective 'time_to_target' needs a target accuracy (--target 0.8)")
        return TimeToTargetObjective(target=target, full_epochs=full_epochs)
    if name == "pareto":
        return ParetoObjective(full_epochs=full_epochs)
    if name == "match_baseline":
        return MatchBaselineObjective(tolerance=tolerance, full_epochs=full_epochs)
    raise ValueError(f"unknown objective {name!r}; choose one of {list(OBJECTIVES)}")
