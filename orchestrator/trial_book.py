"""The search's book of trials: a Ray Tune callback in the driver that keeps every trial's record
(orchestrator/records.py), prints progress once per epoch and one line when a trial ends, and
forwards each event to the tracker.

One book serves every stage of a search: a stage says which trials it runs next (`begin`: their
role, how many, how long), so the baseline and the search's trials share one journal, one
console story and one MLflow parent run.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

from orchestrator import jsonl
from orchestrator.evidence import Evidence
from orchestrator.records import Role, TrialRecord, numeric_metrics, picks_of, plain, read_journal
from orchestrator.tracking import Tracker
from trainables.config import TrialConfig
from trainables.identity import config_key, ledger_key
from trainables.loop.profile import PICK_PREFIX, START_STEP
from trainables.loop.state import validated
from trainables.status import REPEATABLE, TrialStatus, is_out_of_memory_text
from trainables.trial.reports import CHECKPOINT_KEY, checkpoint_uri
from trainables.trial.sampling import SYSTEM_KEY

# A decided contender's expected time to the target (its bounds) and epoch, as the race told.
EXPECTED = ("expected_low_s", "expected_time_to_target_s", "expected_high_s", "expected_epoch",
            "expected_reach", "expected_paced_s")
# Metrics that describe one trial's own run, not its configuration: a duplicate gets its own.
_OWN_RUN = ("trial_wall_s", "fixed_cost_s", "profile_s")


def _error_reason(trial) -> str:
    path = getattr(trial, "error_file", None)
    if path and Path(path).is_file():
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
        if lines:
            return lines[-1].strip()
    return str(getattr(trial, "error_msg", None) or "trial raised an error")


def prediction_metrics(rec: TrialRecord) -> dict[str, float]:
    """A predicted trial's expectation beside what it measured: `prediction_error` is
    (predicted - measured) / measured time to the target, when it reached it.
    `start_prediction_error` is the same for the prediction re-timed at the trial's start
    (`predicted_at_start_s`: its own step, timed in its process before training, in place of
    the screen's): what is left of the error once the screen's reading of the machine is not,
    the drift during the run and the epochs. One-worker trials only (the start's timing has no
    all-reduce, the screen's has). `rec.prediction` is a Prediction's fields
    (orchestrator/screen/predict.py), as the journal keeps them."""
    p = rec.prediction
    if not p:
        return {}
    out = {"predicted_time_to_target_s": p["predicted_time_s"],
           "predicted_epochs": float(p["predicted_epochs"])}
    start, steps = rec.metrics.get(START_STEP), p.get("steps_to_target") or 0
    if _positive(start) and steps and int(p["config"].get("workers", 1)) == 1:
        # Had the screen timed this step: the same steps to the target at the start's pace.
        out["predicted_at_start_s"] = p["predicted_time_s"] + steps * (start - p["step_s"])
    measured = rec.metrics.get("time_to_target_s")
    if _positive(measured):
        out["prediction_error"] = (out["predicted_time_to_target_s"] - measured) / measured
        if "predicted_at_start_s" in out:
            out["start_prediction_error"] = (out["predicted_at_start_s"] - measured) / measured
    return out


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and value == value and value > 0


def _tag(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class TrialBook(Callback):
    """`journal`: a JSON-lines file that gets a line when a trial starts and one when it ends, so
    a resumed search knows the trials it does not run again and those a stop cut short.
    `ledger`: the search's Ledger actor, told each finished trial's result (`seed`: the base
    seed, part of its key)."""

    def __init__(self, tracker: Tracker, out: TextIO = sys.stdout, journal: Path | None = None,
                 base: dict | None = None, ledger: Any = None, seed: int = 0,
                 evidence: Evidence | None = None):
        self.tracker = tracker
        self.ledger = ledger
        self.seed = seed
        self.out = out
        self.journal = journal
        self.base = base or {}  # the fixed settings: with a trial's knobs, its whole config
        self.records, self.cut_short = read_journal(journal)
        # What the current stage runs (`begin`).
        self.role, self.planned, self.epochs, self.stage_base = Role.TRIAL, 0, 0, self.base
        self.predictions: dict[str, dict] = {}
        # What decided each trial, and how far one fell short (the stoppers write it).
        self.evidence = evidence if evidence is not None else Evidence()
        self.stopping = False  # a signal asked the search to stop: open trials are interrupted
        for rec in self.records.values():  # a resumed search's finished trials count as run
            self._tell_ledger(rec)

    def begin(self, role: Role, planned: int, epochs: int, base: dict | None = None,
              predictions: dict[str, dict] | None = None) -> None:
        """The next trials Tune starts are `planned` trials of `role`, `epochs` long, their
        knobs laid over `base` (default: the search's fixed settings). `predictions`: knobs
        (as `config_key`) -> what the predict stage expects of the trial with them."""
        self.role, self.planned, self.epochs = role, planned, epochs
        self.stage_base = self.base if base is None else base
        self.predictions = predictions or {}

    def finished(self, role: Role) -> list[TrialRecord]:
        """Finished trials of `role`, in the order they started."""
        return sorted((r for r in self.records.values() if r.finished and r.role == role),
                      key=lambda r: r.started)

    def discard_cut_short(self) -> None:
        """Settle the trials a stopped driver left half-run: journal them as discarded and delete
        their MLflow runs. Their places in the trial count go to new trials."""
        for trial_id in self.cut_short:
            self.tracker.discard_trial(trial_id)
            self._write(TrialRecord(trial_id, 0, {}, 0.0, time.time(), TrialStatus.DISCARDED))
        self.cut_short = []

    def _write(self, rec: TrialRecord) -> None:
        if self.journal is not None:
            jsonl.append(self.journal, dataclasses.asdict(rec), default=plain)

    def __getstate__(self):
        # Tune pickles its callbacks with the experiment state; a stream (pytest's capture, a
        # file) cannot be pickled and is not state.
        # Nor is the ledger: its actor lives as long as the driver that started it.
        return {k: v for k, v in self.__dict__.items() if k not in ("out", "ledger")}

    def __setstate__(self, state):
        self.__dict__.update(state, out=sys.stdout, ledger=None)

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def _label(self, rec: TrialRecord) -> str:
        if rec.role == Role.TRIAL:
            return f"[trial {rec.number}/{self.planned} {rec.trial_id}]"
        return f"[{rec.role} {rec.trial_id}]"

    def _config(self, knobs: dict[str, Any]) -> dict[str, Any]:
        """The trial's whole config, defaults resolved; as given if it does not validate (the
        trial then fails and says why; the record must not fail first)."""
        try:
            return TrialConfig.from_dict({**self.stage_base, **knobs}).to_dict()
        except (TypeError, ValueError):
            return {**self.stage_base, **knobs}

    def _done_before(self, trial) -> bool:
        """A trial the journal says finished before a resume: its record stands as it was."""
        rec = self.records.get(trial.trial_id)
        return rec is not None and rec.finished

    def on_trial_start(self, iteration, trials, trial, **info):
        if self._done_before(trial):
            return
        old = self.records.get(trial.trial_id)
        if old is not None and not old.finished:
            # Tune retries a failed attempt (FailureConfig): the same trial, row and MLflow run.
            self._print(f"{self._label(old)} retry")
            return
        number = 0 if self.role != Role.TRIAL else 1 + sum(
            r.role == Role.TRIAL for r in self.records.values())
        rec = TrialRecord(trial.trial_id, number, dict(trial.config), time.time(),
                          role=self.role,
                          prediction=self.predictions.get(config_key(dict(trial.config))))
        self.records[trial.trial_id] = rec
        knobs = " ".join(f"{k}={v}" for k, v in rec.knobs.items())
        self._print(f"{self._label(rec)} start  {knobs}".rstrip())
        self._write(rec)  # before MLflow hears of it: a resume must know every run it may find
        tags = {"baseline": "true"} if rec.role == Role.BASELINE else {}
        self.tracker.start_trial(rec.trial_id, rec.knobs, config=self._config(rec.knobs),
                                 role=rec.role, tags=tags)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self._done_before(trial):
            return
        rec = self.records[trial.trial_id]
        rec.metrics = numeric_metrics(result)
        rec.epochs = int(result.get("epoch", rec.epochs))
        rec.status = TrialStatus(result.get("status", rec.status))
        if result.get("reason"):
            rec.reason = str(result["reason"])
        rec.picks = picks_of(result) or rec.picks
        rec.checkpoint = result.get(CHECKPOINT_KEY) or rec.checkpoint
        m = rec.metrics
        # An epoch that skipped validation repeats the last one's metrics (`val_epoch` is
        # theirs): they are no point of this epoch's learning curve, nor of MLflow's val charts.
        own = validated(result)
        if own and "val_score" in m and "train_time_s" in m:
            rec.curve.append([rec.epochs, m["val_score"], m["train_time_s"]])
        if "train_loss" in m:
            rec.losses.append([rec.epochs, m["train_loss"]])
        if "noise_scale" in m:
            rec.noise.append([rec.epochs, m["noise_scale"]])
            rec.noise_s += m.get("noise_s", 0.0)
        name = "dice" if "val_dice" in m else "acc"  # what val_score is for this task
        score = f"{name} {m.get('val_score', 0):.3f}" if own else "not validated"
        planned = rec.knobs.get("epochs", self.epochs)  # a confirmation plans its own length
        self._print(
            f"{self._label(rec)} epoch {rec.epochs}/{planned}  "
            f"{score}  loss {m.get('train_loss', float('nan')):.3f}  "
            f"train {m.get('train_time_s', 0):.1f}s  {m.get('samples_per_s', 0):,.0f} samples/s"
            f"  objective {m.get('objective', float('nan')):.4f}"
        )
        self.tracker.log_epoch(rec.trial_id, m if own else {
            k: v for k, v in m.items() if not k.startswith("val_") or k == "val_epoch"},
            step=rec.epochs)
        # What the trial's processes sampled of their own nodes, and which nodes they were.
        # Taken out of the result: Tune keeps the last result in its experiment state.
        system = result.pop(SYSTEM_KEY, None) or {}
        if system.get("samples") or system.get("tags"):
            self.tracker.log_system(rec.trial_id, system.get("samples", []),
                                    system.get("tags", {}))

    def _finish(self, trial_id: str, status: TrialStatus, reason: str | None) -> None:
        rec = self.records[trial_id]
        rec.ended, rec.status, rec.reason = time.time(), status, reason
        short_by = self.evidence.shortfall(trial_id)
        rec.short_by = short_by if short_by is not None else rec.short_by
        if status == TrialStatus.DUPLICATE:  # its timings are the first trial's
            for key in _OWN_RUN:
                rec.metrics.pop(key, None)
        elif rec.fixed_cost_s is not None:
            rec.metrics["trial_wall_s"] = rec.wall_s
            rec.metrics["fixed_cost_s"] = rec.fixed_cost_s
        rec.metrics.update(prediction_metrics(rec))
        told = self.evidence.expectation(trial_id)
        if told is not None and status == TrialStatus.DECIDED:  # what the race expects of it
            rec.metrics.update(zip(EXPECTED, map(float, told)))
        detail = f" ({reason})" if reason else ""
        self._print(f"{self._label(rec)} {status} after {rec.wall_s:.1f}s wall{detail}")
        self.tracker.end_trial(rec.trial_id, status, rec.metrics, reason,
                               tags={PICK_PREFIX + k: _tag(v) for k, v in rec.picks.items()})
        self._tell_ledger(rec)
        self._write(rec)

    def _ensure(self, trial) -> None:
        if trial.trial_id not in self.records:  # failed before it started
            self.on_trial_start(0, [], trial)

    def on_trial_complete(self, iteration, trials, trial, **info):
        if self._done_before(trial):
            return
        self._ensure(trial)
        rec = self.records[trial.trial_id]
        # An in-process trial's checkpoints are Tune's; a worker group's, Ray Train's (its
        # reports name them).
        rec.checkpoint = checkpoint_uri(getattr(trial, "checkpoint", None)) or rec.checkpoint
        status, reason = rec.status, rec.reason
        # A trial that ends while still 'running' was stopped by a stopper, the scheduler or
        # the budget.
        if status == TrialStatus.RUNNING:
            status, reason = self.evidence.decision(trial.trial_id) or (
                TrialStatus.PRUNED, "stopped early by the search (scheduler or time budget)")
        self._finish(trial.trial_id, status, reason)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._ensure(trial)
        reason = _error_reason(trial)
        # Out of memory in a multi-worker trial surfaces as a worker-group error.
        self._finish(trial.trial_id, TrialStatus.INFEASIBLE if is_out_of_memory_text(reason)
                     else TrialStatus.FAILED, reason)

    def on_experiment_end(self, trials, **info):
        """Settle every trial Tune created: one that errored before any callback saw it ends
        `failed` with Ray's reason; one still running ends `interrupted` if a signal stopped the
        search, else `pruned` (the time budget ran out). No record stays `running`."""
        for trial in trials:
            rec = self.records.get(trial.trial_id)
            if trial.status == "ERROR" and not (rec is not None and rec.finished):
                self._ensure(trial)  # Tune's own word for a trial that raised
                self._finish(trial.trial_id, TrialStatus.FAILED, _error_reason(trial))
        self.close_open()

    def close_open(self) -> None:
        """End every record still open: `interrupted` when a signal stopped the search (a
        resume runs new trials in their places), else `pruned` by the search."""
        for rec in list(self.records.values()):
            if not rec.finished:
                if self.stopping:
                    self._finish(rec.trial_id, TrialStatus.INTERRUPTED, "interrupted by a signal")
                else:
                    self._finish(rec.trial_id, TrialStatus.PRUNED,
                                 "stopped by the search's time budget before its end")

    def summary(self, role: Role = Role.TRIAL) -> str:
        """'8 trials: 6 completed, 1 infeasible, 1 failed' (most common status first)."""
        counts: dict[str, int] = {}
        records = [r for r in self.records.values() if r.role == role]
        for rec in records:
            counts[rec.status] = counts.get(rec.status, 0) + 1
        parts = ", ".join(f"{n} {status}" for status, n in
                          sorted(counts.items(), key=lambda item: (-item[1], item[0])))
        total = len(records)
        return f"{total} trial{'s' if total != 1 else ''}" + (f": {parts}" if parts else "")

    def _tell_ledger(self, rec: TrialRecord) -> None:
        if self.ledger is None or rec.role != Role.TRIAL or rec.status == TrialStatus.DUPLICATE:
            return
        import ray

        key = ledger_key(rec.knobs, self.seed)
        if rec.status in REPEATABLE:
            result = {"trial_id": rec.trial_id, "number": rec.number, "status": rec.status,
                      "epochs": rec.epochs,
                      "metrics": {k: v for k, v in rec.metrics.items() if k not in _OWN_RUN},
                      "picks": rec.picks}
            # Waited on: the next trial may ask for this key as soon as this callback returns.
            ray.get(self.ledger.record.remote(key, result), timeout=30)
        else:
            ray.get(self.ledger.release.remote(key, rec.trial_id), timeout=30)
