"""A baseline taken from history: the run you already made, not trained again.

    --baseline runs:/RUN_ID   a run in the search's MLflow store: this tool's, or your own,
                              whose metric history holds a validation score per epoch
                              (`val_score`, step = epoch) and whose params give its settings
    --baseline run.csv        a CSV with the columns epoch, seconds, score

Its learning curve gives S (its final score) and where it reached S - tolerance; its settings
(the run's params that are trial settings, then `baseline_set` over them, over the search's
fixed settings) are what it trained. Its time is what the same settings cost here, so that
both sides of every ratio are on one clock:

* a run this tool trained on this machine kind, of the same task, its settings unchanged (no
  `baseline_set`): its own recorded training time, which is this clock (the same loop, the
  same warm-up before it, the same kind of machine). Timing its step instead read unet3d's
  32-epoch baseline as 60 s where its run trained 84 s (docs/benchmarks.md#long-jobs-the-
  race): a few steps in a tight loop miss part of what an epoch costs;
* any other run: the baseline stage times its step on this machine for a few steps
  (orchestrator/step_timing.py), and each epoch of its curve takes that; the recorded seconds,
  from another machine or another day, are kept beside, as `history_seconds`.

With your own task (`--task`), the trials then train exactly what that run trained. Bad input
(a run that does not exist, a CSV without a score column) is refused before any work.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import yaml

from trainables.config import TrialConfig
from trainables.status import TrialStatus

PREFIX = "runs:/"
COLUMNS = ("epoch", "seconds", "score")


def is_history(baseline: str | None) -> bool:
    return isinstance(baseline, str) and (baseline.startswith(PREFIX) or
                                          baseline.lower().endswith(".csv"))


def load(baseline: str, tracking_uri: str) -> dict[str, Any]:
    """{'source', 'curve' ([epoch, score, seconds]), 'settings', 'seconds_from'}; ValueError
    (one line) for a run that does not exist, a CSV that cannot be read or has no score."""
    if baseline.startswith(PREFIX):
        from orchestrator.tracking.history import read_run

        run_id = baseline.removeprefix(PREFIX).strip("/").split("/")[0]
        if not run_id:
            raise ValueError(f"baseline {baseline!r}: give a run id, as runs:/RUN_ID")
        run = read_run(tracking_uri, run_id)
        return {"source": baseline, "curve": run.curve, "settings": _settings(run.params),
                "seconds_from": run.seconds_from, "machine_kind": run.machine_kind,
                "task": run.task, "noise": run.noise, "losses": run.losses}
    return {"source": str(Path(baseline).resolve()), "curve": _csv_curve(Path(baseline)),
            "settings": {}, "seconds_from": "the CSV's seconds", "machine_kind": None,
            "task": None}


def same_clock(history: dict, machine_kind: str, task: str, baseline_set: dict | None
               ) -> bool:
    """Whether the run's recorded training time is this search's clock: this tool trained it
    (its `train_time_s` per epoch) on this machine kind, with the same task (model, loss,
    optimizer), and it is compared as it ran."""
    from orchestrator.tracking.history import TIME

    return history.get("machine_kind") == machine_kind and history.get("task") == task and \
        history.get("seconds_from") == TIME and not baseline_set


def _csv_curve(path: Path) -> list[list[float]]:
    if not path.is_file():
        raise ValueError(f"baseline {path}: no such CSV (epoch, seconds, score)")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns = {c.strip().lower() for c in (rows[0].keys() if rows else [])}
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"baseline {path}: no {', '.join(repr(c) for c in missing)} "
                         f"column{'s' if len(missing) > 1 else ''}: it needs epoch, seconds, "
                         "score (a validation score per epoch, higher is better)")
    curve = []
    for n, row in enumerate(rows, 2):
        values = {k.strip().lower(): v for k, v in row.items()}
        try:
            point = [int(values["epoch"]), float(values["score"]), float(values["seconds"])]
        except (TypeError, ValueError):
            raise ValueError(f"baseline {path}, line {n}: epoch, seconds and score must be "
                             f"numbers (got {values})") from None
        if not all(math.isfinite(v) for v in point):
            raise ValueError(f"baseline {path}, line {n}: not a finite number")
        curve.append(point)
    return sorted(curve)


def _settings(params: dict[str, str]) -> dict[str, Any]:
    """The run's params that are trial settings, read back from their logged text."""
    fields = set(TrialConfig.field_names())
    out = {}
    for key, text in params.items():
        if key in fields:
            try:
                out[key] = yaml.safe_load(text)
            except yaml.YAMLError:
                out[key] = text
    return out


def config_of(history: dict, base: dict, own: dict) -> dict:
    """What the run trained: the search's fixed settings, the run's own, `baseline_set`; its
    length its curve's."""
    epochs = max(int(e) for e, _, _ in history["curve"])
    config = {**base, **history["settings"], **own, "epochs": epochs}
    return TrialConfig.from_dict(config).to_dict()


def record(history: dict, config: dict, timed: dict | None, search: str, search_id: str
           ) -> dict:
    """The baseline's record (baseline.json) from its history and its step timed here (a
    screen result: step_s, data_s, one_off_s, steps_per_epoch), or, `timed` None, its own
    recorded seconds (`same_clock`)."""
    if timed is None:
        curve = [[int(e), float(s), float(t)] for e, s, t in history["curve"]]
    elif timed.get("status") != TrialStatus.COMPLETED:
        raise RuntimeError(f"the baseline's settings could not be timed here "
                           f"({timed.get('status')}: {timed.get('reason')})")
    else:
        per_epoch = timed["steps_per_epoch"] * (timed["step_s"] + timed.get("data_s", 0.0))
        one_off = timed.get("one_off_s", 0.0)
        curve = [[int(e), float(s), one_off + int(e) * per_epoch]
                 for e, s, _ in history["curve"]]
    epochs, noise = curve[-1][0], history.get("noise") or []
    return {"kind": "history", "source": history["source"], "config": config,
            "trial_id": history["source"], "status": str(TrialStatus.COMPLETED),
            "val_score": curve[-1][1],
            "train_time_s": curve[-1][2], "full_run_s": None,
            "epochs": epochs, "curve": curve, "history_seconds": history["curve"],
            "seconds_from": history["seconds_from"], "timed_here": timed,
            "clock": "timed here" if timed is not None else "recorded",
            # What this tool's run measured of its learning (none for a run of your own).
            "noise_scale": noise[-1][1] if noise else math.nan, "noise": noise,
            "losses": history.get("losses") or [], "first_use_s": None,
            "noise_s": 0.0, "parent_run_id": None, "search": search, "search_id": search_id}
