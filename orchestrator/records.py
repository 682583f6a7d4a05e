"""A trial's record, as the search's journal keeps it, and what a journal says on resume.

Every trial of a search (the baseline included, with its role) has one `TrialRecord`. The trial
book writes it to `trials.jsonl` when the trial starts and when it ends; the last line of a
trial wins. A resumed search reads the journal back with `read_journal`: what each trial's
status does on resume is its `OnResume` trait (trainables/status.py), never a reason's words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator import jsonl
from trainables.loop.profile import PICK_PREFIX
from trainables.status import OnResume, TrialStatus, traits

# A decided contender's chance to reach the target counts down to this at least (the race cuts
# those below ~0.2 as short: orchestrator/screen/race.py SHORT_AT).
LEAST_REACH = 0.05


def per_chance(seconds: float, reach: float) -> float:
    """`seconds` to the target over the chance of reaching it, floored at `LEAST_REACH`: the
    order a contender is measured in (`TrialRecord.per_chance_s`), and what
    benchmarks/curve_models.py ranks a model's pick by."""
    return seconds / max(reach, LEAST_REACH)


class Role(StrEnum):
    """Why a trial ran: the leaderboard's `role` column and the MLflow run's
    `orchestrator.role` tag."""

    TRIAL = "trial"
    """One of the search's `num_trials`, proposed by the sampler."""
    BASELINE = "baseline"
    """What the user runs today, run first and outside `num_trials` (orchestrator/baseline.py)."""
    EARLIER = "earlier"
    """A result an earlier search on the same workload and data confirmed, reused, not run
    again (orchestrator/screen/knowledge.py)."""
    MEASURED = "measured"
    """The found configuration trained as it is handed over (best_config.json), to its end:
    the run the speedup is measured on (orchestrator/measure.py)."""


@dataclass
class TrialRecord:
    trial_id: str
    number: int
    knobs: dict[str, Any]
    started: float
    ended: float | None = None
    status: TrialStatus = TrialStatus.RUNNING
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    epochs: int = 0
    picks: dict[str, Any] = field(default_factory=dict)
    """Speed-only switches the trial's profile picked and trained with (trainables/loop/profile)."""
    role: Role = Role.TRIAL
    curve: list[list[float]] = field(default_factory=list)
    """[epoch, val_score, train_time_s] of every epoch reported: the learning curve."""
    noise: list[list[float]] = field(default_factory=list)
    """[epoch, gradient noise scale] where it was measured (the baseline's, for predictions)."""
    noise_s: float = 0.0
    """Seconds spent measuring the noise scale, outside its clock (the search's, not the run's)."""
    losses: list[list[float]] = field(default_factory=list)
    """[epoch, training loss] of every epoch reported (the baseline's: where a confirmation may
    skip validating, orchestrator/stopper.validation_gate)."""
    prediction: dict[str, Any] | None = None
    """What the predict stage expected of this trial (orchestrator/screen/predict.py), if it led to it."""
    short_by: float | None = None
    """How far it fell short where it learned too little: its gap to the baseline's learning
    curve when the stopper cut it, or to the target after all its epochs (the stopper's
    `behind`, orchestrator/stopper.py); None when it did not. Journalled with the trial, so a
    resumed search learns from a miss as the live one did."""
    checkpoint: str | None = None
    """Its last checkpoint (a path, or a URI off this machine's disk): the race's winner's is
    where its measured run goes on from (orchestrator/measure.py)."""

    def __post_init__(self) -> None:  # the journal gives words; the record holds their enums
        self.status, self.role = TrialStatus(self.status), Role(self.role)

    @property
    def finished(self) -> bool:
        return self.ended is not None

    @property
    def wall_s(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    @property
    def time_to_target_s(self) -> float | None:
        """Training time to the first validated epoch at the target; None if it never got
        there (or it had no target)."""
        value = self.metrics.get("time_to_target_s")
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    @property
    def reached(self) -> bool:
        """Whether it reached the target."""
        return self.time_to_target_s is not None

    @property
    def expected_s(self) -> float | None:
        """A decided contender's expected time to the target (the race's); None otherwise."""
        value = self.metrics.get("expected_time_to_target_s")
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    @property
    def reach(self) -> float:
        """How likely a decided contender reaches the target by its plan's end, as the race
        tells it (1 where it reached it, or the race did not say)."""
        value = self.metrics.get("expected_reach")
        return float(value) if isinstance(value, (int, float)) and 0 < value <= 1 else 1.0

    @property
    def told_s(self) -> float | None:
        """Seconds to the target: measured, or expected by the race (a decided contender);
        None: neither. What it hands over, where it reaches the target."""
        if self.time_to_target_s is not None:
            return self.time_to_target_s
        return self.expected_s if self.status == TrialStatus.DECIDED else None

    @property
    def per_chance_s(self) -> float | None:
        """Seconds to the target per chance of reaching it: measured (a sure thing), or
        expected by the race over its chance (a decided contender); None: neither. The order
        the measure stage tries configurations in, and the leaderboard ranks them in: each miss
        of the measure stage costs a whole run, so a contender a little faster but likely to end
        short of the target comes after a sure one."""
        if self.reached or self.told_s is None:
            return self.told_s
        return per_chance(self.told_s, self.reach)

    @property
    def fixed_cost_s(self) -> float | None:
        """Trial wall time that is not training, validation or the speed profile (reported
        apart as profile_s): Ray start-up, data, teardown."""
        if self.wall_s is None or "train_time_s" not in self.metrics:
            return None
        return (self.wall_s - self.metrics["train_time_s"] - self.metrics.get("eval_time_s", 0.0)
                - self.metrics.get("profile_s", 0.0))


def read_journal(path: Path | None) -> tuple[dict[str, TrialRecord], list[str]]:
    """The trials a journal holds: those that finished (trial id -> record), and the ids of those
    a stop cut short (started but never ended, or ended `interrupted`): a resume runs new
    trials in their places. Trials an earlier resume already replaced are neither."""
    last: dict[str, TrialRecord] = {}
    for line in jsonl.read(path) if path is not None else []:
        last[line["trial_id"]] = TrialRecord(**line)
    finished, cut_short = {}, []
    for trial_id, rec in last.items():
        action = traits(rec.status).on_resume if rec.finished else OnResume.RUN_AGAIN
        if action == OnResume.KEEP:
            finished[trial_id] = rec
        elif action == OnResume.RUN_AGAIN:
            cut_short.append(trial_id)
    return finished, cut_short


# Metrics a trial reports that are not numbers to plot, or are Tune's own bookkeeping.
_NOT_METRICS = {
    "epoch", "done", "status", "timestamp", "training_iteration", "time_this_iter_s",
    "time_total_s", "time_since_restore", "iterations_since_restore", "pid",
}


def numeric_metrics(result: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v) for k, v in result.items()
        if k not in _NOT_METRICS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def picks_of(result: dict[str, Any]) -> dict[str, Any]:
    """The profile's picks a report carries ('pick.channels_last': True -> channels_last)."""
    return {k.removeprefix(PICK_PREFIX): plain(v) if not isinstance(v, (bool, str)) else v
            for k, v in result.items() if k.startswith(PICK_PREFIX)}
