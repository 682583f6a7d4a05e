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

from trainables.status import FAILED_STATUSES

ACCURACY, TIME = "val_score", "train_time_s"

# A trial that diverged or could not run scores below anything a real trial can score, so
# Optuna learns to avoid its region (TPE ranks values; the size of the gap does not matter).
FAILED_SCORE = -1e9


def projected_time(metrics: dict) -> float:
    """Training time projected to the planned epochs: a trial stopped early (or reporting an
    intermediate epoch) is compared as if it had run to the end, so stopping early can never
    make a configuration look faster than it is. Accuracy is not projected (it only grows), so a
    partial result can only look worse than the finished one."""
    t = max(float(metrics[TIME]), 1e-6)
    epoch, planned = metrics.get("epoch"), metrics.get("epochs_planned")
    # A trial that ended early on its own (early stopping, done=True) really took this time.
    if epoch and planned and epoch < planned and not metrics.get("done"):
        t *= planned / epoch
    return t


@dataclass(frozen=True, kw_only=True)
class WeightedObjective:
    """objective = accuracy - time_weight * log2(train_time_s / reference_time_s)  (maximize)

    Each doubling of training time costs `time_weight` of accuracy (0.05 = 5 points), whatever
    the absolute times: a 10 s -> 5 s saving is worth as much as 100 s -> 50 s.
    `reference_time_s` only shifts every score by the same constant.
    """

    time_weight: float = 0.05
    reference_time_s: float = 10.0
    name: str = field(default="weighted", init=False)

    def __post_init__(self) -> None:
        if not self.time_weight >= 0:
            raise ValueError(f"time_weight must be >= 0 (got {self.time_weight}); "
                             "0 ranks by accuracy alone")
        if not self.reference_time_s > 0:
            raise ValueError(f"reference_time_s must be > 0 (got {self.reference_time_s})")

    metric = "objective"
    mode = "max"

    @property
    def formula(self) -> str:
        return (f"objective = val_score - {self.time_weight} * "
                f"log2(train_time_s / {self.reference_time_s})  (maximize)")

    def __call__(self, metrics: dict, state: dict | None = None) -> dict:
        if metrics.get("status") in FAILED_STATUSES:
            return {**metrics, "objective": FAILED_SCORE}
        t = projected_time(metrics)
        value = float(metrics[ACCURACY]) - self.time_weight * math.log2(t / self.reference_time_s)
        return {**metrics, "objective": value}


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
    name: str = field(default="time_to_target", init=False)
    metric = "objective"
    mode = "max"

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
        if "reached_at" not in state and float(metrics[ACCURACY]) >= self.target:
            state["reached_at"] = float(metrics[TIME])
        best = max(state.get("best", 0.0), float(metrics[ACCURACY]))
        state["best"] = best
        reached = state.get("reached_at")
        value = -reached if reached is not None else _MISSED + 1000 * best
        return {**metrics, "objective": value,
                "time_to_target_s": reached if reached is not None else math.nan}


@dataclass(frozen=True, kw_only=True)
class ParetoObjective:
    """Two objectives, no weights: maximize val_score, minimize train_time_s. The search
    returns the non-dominated set (no other trial is both more accurate and faster).

    Early stopping is off in this mode (ASHA needs one number to rank by), and Optuna is told
    each trial's final epoch only, so a half-trained trial can never sit on the front.
    `objective` (for sorting the table) is val_score.
    """

    name: str = field(default="pareto", init=False)
    metric = [ACCURACY, TIME]
    mode = ["max", "min"]

    @property
    def formula(self) -> str:
        return "pareto: maximize val_score, minimize train_time_s (non-dominated set)"

    def __call__(self, metrics: dict, state: dict | None = None) -> dict:
        if metrics.get("status") in FAILED_STATUSES:
            return {**metrics, "objective": FAILED_SCORE, ACCURACY: 0.0}
        return {**metrics, "objective": float(metrics[ACCURACY])}


OBJECTIVES = ("weighted", "time_to_target", "pareto")
Objective = WeightedObjective | TimeToTargetObjective | ParetoObjective


def make_objective(name: str, *, time_weight: float = 0.05, reference_time_s: float = 10.0,
                   target: float | None = None) -> Objective:
    if name == "weighted":
        return WeightedObjective(time_weight=time_weight, reference_time_s=reference_time_s)
    if name == "time_to_target":
        if target is None:
            raise ValueError("objective 'time_to_target' needs a target accuracy (--target 0.8)")
        return TimeToTargetObjective(target=target)
    if name == "pareto":
        return ParetoObjective()
    raise ValueError(f"unknown objective {name!r}; choose one of {list(OBJECTIVES)}")
