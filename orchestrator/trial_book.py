"""The search's book of trials: a Ray Tune callback in the driver that keeps every trial's record,
prints progress once per epoch, and forwards each event to the tracker.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

from orchestrator import jsonl
from orchestrator.tracking import Tracker
from trainables.config import TrialConfig
from trainables.loop.profile import PICK_PREFIX
from trainables.status import TrialStatus
from trainables.trial.ledger import RECORDED, ledger_key

DISCARDED = TrialStatus.DISCARDED
# Why a trial still running when the search ended is `pruned` (the time budget, or Ctrl-C).
CUT_REASON = "stopped by the search (time budget or interrupt) before its end"
# Ends that mean a stopped driver cut the trial short: a resume runs a new trial in its place.
_CUT_SHORT = {TrialStatus.INTERRUPTED.value}

# Metrics that describe one trial's own run, not its configuration: a duplicate gets its own.
_OWN_RUN = ("trial_wall_s", "fixed_cost_s", "profile_s")

# Metrics a trial reports that are not numbers to plot, or are Tune's own bookkeeping.
_NOT_METRICS = {
    "epoch", "done", "status", "timestamp", "training_iteration", "time_this_iter_s",
    "time_total_s", "time_since_restore", "iterations_since_restore", "pid",
}


@dataclass
class TrialRecord:
    trial_id: str
    number: int
    knobs: dict[str, Any]
    started: float
    ended: float | None = None
    status: str = "running"
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    epochs: int = 0
    picks: dict[str, Any] = field(default_factory=dict)
    """Speed-only switches the trial's profile picked and trained with (trainables/loop/profile)."""

    @property
    def wall_s(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    @property
    def fixed_cost_s(self) -> float | None:
        """Trial wall time that is not training, validation or the speed profile (reported
        apart as profile_s): Ray start-up, data, teardown."""
        if self.wall_s is None or "train_time_s" not in self.metrics:
            return None
        return (self.wall_s - self.metrics["train_time_s"] - self.metrics.get("eval_time_s", 0.0)
                - self.metrics.get("profile_s", 0.0))


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def picks_of(result: dict[str, Any]) -> dict[str, Any]:
    """The profile's picks a report carries ('pick.channels_last': True -> channels_last)."""
    return {k.removeprefix(PICK_PREFIX): _plain(v) if not isinstance(v, (bool, str)) else v
            for k, v in result.items() if k.startswith(PICK_PREFIX)}


def _tag(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def numeric_metrics(result: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v) for k, v in result.items()
        if k not in _NOT_METRICS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def read_journal(path: Path | None) -> tuple[dict[str, TrialRecord], list[str]]:
    """The trials a journal holds: those that finished (trial id -> record), and the ids of those
    that started but never ended (cut short by a driver's death). The last line of a trial wins;
    trials already discarded by an earlier resume are neither."""
    last: dict[str, TrialRecord] = {}
    for line in jsonl.read(path) if path is not None else []:
        last[line["trial_id"]] = TrialRecord(**line)
    for rec in last.values():
        if rec.reason == CUT_REASON or rec.status in _CUT_SHORT:
            rec.ended = None  # cut by Ctrl-C (or the budget): a resume runs a new trial instead
    finished = {tid: r for tid, r in last.items() if r.ended is not None and r.status != DISCARDED}
    cut_short = [tid for tid, r in last.items() if r.ended is None]
    return finished, cut_short


def _error_reason(trial) -> str:
    path = getattr(trial, "error_file", None)
    if path and Path(path).is_file():
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
        if lines:
            return lines[-1].strip()
    return str(getattr(trial, "error_msg", None) or "trial raised an error")


class TrialBook(Callback):
    """`journal`: a JSON-lines file that gets a line when a trial starts and one when it ends, so
    a resumed search knows the trials it does not run again and those a kill cut short.
    `ledger`: the search's Ledger actor, told each finished trial's result (`seed`: the base
    seed, part of its key)."""

    def __init__(self, tracker: Tracker, num_trials: int, epochs: int, out: TextIO = sys.stdout,
                 journal: Path | None = None, base: dict | None = None, ledger: Any = None,
                 seed: int = 0):
        self.tracker = tracker
        self.ledger = ledger
        self.seed = seed
        self.num_trials = num_trials
        self.epochs = epochs
        self.out = out
        self.journal = journal
        self.base = base or {}  # the fixed settings: with a trial's knobs, its whole config
        self.records, self.cut_short = read_journal(journal)
        # trial id -> (status, reason) of trials a stopper ended (orchestrator/stopper.py).
        self.stop_reasons: dict[str, tuple[str, str]] = {}
        for rec in self.records.values():  # a resumed search's finished trials count as run
            self._tell_ledger(rec)

    def discard_cut_short(self) -> None:
        """Settle the trials a dead driver left half-run: journal them as discarded and delete
        their MLflow runs. Their places in the trial count go to new trials."""
        for trial_id in self.cut_short:
            self.tracker.discard_trial(trial_id)
            if self.journal is not None:
                jsonl.append(self.journal, {"trial_id": trial_id, "number": 0, "knobs": {},
                                            "started": 0.0, "ended": time.time(),
                                            "status": DISCARDED})
        self.cut_short = []

    def _write(self, rec: TrialRecord) -> None:
        if self.journal is not None:
            jsonl.append(self.journal, dataclasses.asdict(rec), default=_plain)

    def __getstate__(self):
        # Tune pickles its callbacks with the experiment state; a stream (pytest's capture, a
        # file) cannot be pickled and is not state.
        # Nor is the ledger: its actor lives as long as the driver that started it.
        return {k: v for k, v in self.__dict__.items() if k not in ("out", "ledger")}

    def __setstate__(self, state):
        self.__dict__.update(state, out=sys.stdout, ledger=None)

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def _tag(self, rec: TrialRecord) -> str:
        return f"[trial {rec.number}/{self.num_trials} {rec.trial_id}]"

    def _config(self, knobs: dict[str, Any]) -> dict[str, Any]:
        """The trial's whole config, defaults resolved; as given if it does not validate (the
        trial then fails and says why; the record must not fail first)."""
        try:
            return TrialConfig.from_dict({**self.base, **knobs}).to_dict()
        except (TypeError, ValueError):
            return {**self.base, **knobs}

    def _done_before(self, trial) -> bool:
        """A trial the journal says finished before a resume: its record stands as it was."""
        rec = self.records.get(trial.trial_id)
        return rec is not None and rec.ended is not None

    def on_trial_start(self, iteration, trials, trial, **info):
        if self._done_before(trial):
            return
        old = self.records.get(trial.trial_id)
        if old is not None and old.ended is None and old.status == TrialStatus.RUNNING:
            # Tune retries a failed attempt (FailureConfig): the same trial, row and MLflow run.
            self._print(f"{self._tag(old)} retry")
            return
        number = old.number if old else len(self.records) + 1
        rec = TrialRecord(trial.trial_id, number, dict(trial.config), time.time())
        self.records[trial.trial_id] = rec
        knobs = " ".join(f"{k}={v}" for k, v in rec.knobs.items())
        self._print(f"{self._tag(rec)} start  {knobs}")
        self._write(rec)  # before MLflow hears of it: a resume must know every run it may find
        self.tracker.start_trial(rec.trial_id, rec.knobs, config=self._config(rec.knobs))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self._done_before(trial):
            return
        rec = self.records[trial.trial_id]
        rec.metrics = numeric_metrics(result)
        rec.epochs = int(result.get("epoch", rec.epochs))
        rec.status = str(result.get("status", rec.status))
        if result.get("reason"):
            rec.reason = str(result["reason"])
        rec.picks = picks_of(result) or rec.picks
        m = rec.metrics
        score = "dice" if "val_dice" in m else "acc"  # what val_score is for this task
        self._print(
            f"{self._tag(rec)} epoch {rec.epochs}/{self.epochs}  "
            f"{score} {m.get('val_score', 0):.3f}  loss {m.get('train_loss', float('nan')):.3f}  "
            f"train {m.get('train_time_s', 0):.1f}s  {m.get('samples_per_s', 0):,.0f} samples/s"
            f"  objective {m.get('objective', float('nan')):.4f}"
        )
        self.tracker.log_epoch(rec.trial_id, rec.metrics, step=rec.epochs)

    def _finish(self, trial, status: str, reason: str | None) -> None:
        rec = self.records.get(trial.trial_id)
        if rec is None:  # failed before it started
            self.on_trial_start(0, [], trial)
            rec = self.records[trial.trial_id]
        rec.ended, rec.status, rec.reason = time.time(), status, reason
        if status == TrialStatus.DUPLICATE:  # its timings are the first trial's
            for key in _OWN_RUN:
                rec.metrics.pop(key, None)
        elif rec.fixed_cost_s is not None:
            rec.metrics["trial_wall_s"] = rec.wall_s
            rec.metrics["fixed_cost_s"] = rec.fixed_cost_s
        detail = f" ({reason})" if reason else ""
        self._print(f"{self._tag(rec)} {status} after {rec.wall_s:.1f}s wall{detail}")
        self.tracker.end_trial(rec.trial_id, status, rec.metrics, reason,
                               tags={PICK_PREFIX + k: _tag(v) for k, v in rec.picks.items()})
        self._tell_ledger(rec)
        self._write(rec)

    def on_trial_complete(self, iteration, trials, trial, **info):
        if self._done_before(trial):
            return
        rec = self.records.get(trial.trial_id)
        status = rec.status if rec else "failed"
        # A trial that ends while still 'running' was stopped by a stopper, the scheduler or
        # the budget.
        reason = rec.reason if rec else None
        if status == "running":
            status, reason = self.stop_reasons.get(
                trial.trial_id, ("pruned", "stopped early by the search (scheduler or time budget)"))
        self._finish(trial, status, reason)

    def on_trial_error(self, iteration, trials, trial, **info):
        reason = _error_reason(trial)
        # Out of memory in a multi-worker trial surfaces as a worker-group error.
        infeasible = any(s in reason for s in ("OutOfMemoryError", "out of memory"))
        self._finish(trial, "infeasible" if infeasible else "failed", reason)

    def on_experiment_end(self, trials, **info):
        """Settle every trial Tune created: one that errored before any callback saw it ends
        `failed` with Ray's reason; one cut by the time budget or Ctrl-C ends `pruned` with
        its last reported metrics. No record stays `running`."""
        for trial in trials:
            rec = self.records.get(trial.trial_id)
            if rec is not None and rec.ended is not None:
                continue
            if trial.status == "ERROR":
                self._finish(trial, TrialStatus.FAILED.value, _error_reason(trial))
            else:
                self._finish(trial, TrialStatus.PRUNED.value, CUT_REASON)

    def end_open_trials_as(self, status: str, reason: str) -> None:
        """Close the records no Tune callback closed (the driver was interrupted)."""
        for rec in self.records.values():
            if rec.ended is None:
                rec.ended, rec.status, rec.reason = time.time(), status, reason
                self.tracker.end_trial(rec.trial_id, status, rec.metrics, reason)
                self._write(rec)

    def summary(self) -> str:
        """'8 trials: 6 completed, 1 infeasible, 1 failed' (most common status first)."""
        counts: dict[str, int] = {}
        for rec in self.records.values():
            counts[rec.status] = counts.get(rec.status, 0) + 1
        parts = ", ".join(f"{n} {status}" for status, n in
                          sorted(counts.items(), key=lambda item: (-item[1], item[0])))
        total = len(self.records)
        return f"{total} trial{'s' if total != 1 else ''}" + (f": {parts}" if parts else "")

    def _tell_ledger(self, rec: TrialRecord) -> None:
        if self.ledger is None or rec.status == TrialStatus.DUPLICATE:
            return
        import ray

        key = ledger_key(rec.knobs, self.seed)
        if rec.status in RECORDED:
            result = {"trial_id": rec.trial_id, "number": rec.number, "status": rec.status,
                      "epochs": rec.epochs,
                      "metrics": {k: v for k, v in rec.metrics.items() if k not in _OWN_RUN},
                      "picks": rec.picks}
            # Waited on: the next trial may ask for this key as soon as this callback returns.
            ray.get(self.ledger.record.remote(key, result), timeout=30)
        else:
            ray.get(self.ledger.release.remote(key, rec.trial_id), timeout=30)
