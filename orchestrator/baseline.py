"""The baseline trial: what the user runs today, run first, so every trial says how much faster
it is (issue 17, item 1).

    seeds  the legacy loop with the seed write-ups' 'before' habits: fp32, batch 32, one
           worker, DataLoader, a fixed lr (no scaling), no compile, no channels_last
    base   the search's fixed settings (`base`) as they are: what you run today
    none   no baseline
    PATH   a baseline measured before: the `baseline.json` of an earlier search (not run again)
    runs:/RUN_ID, or a CSV of epoch, seconds, score
           your run from history: its curve, on this clock (orchestrator/
           history_baseline.py)

It is a trial of the search itself, run by the search's baseline stage (orchestrator/search.py)
before the search's trials and outside `num_trials`: the same header announces it, the same
trial book journals and prints it, its MLflow run is a child of the search's parent run tagged
`baseline=true` (`orchestrator.role=baseline`), the leaderboard gets its row with
`role=baseline`, and `baseline.json` in the search folder keeps its config and result (and its
learning curve). It runs as given: no speed profile, no duplicate ledger.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from orchestrator import history_baseline
from orchestrator.curves import first_at
from trainables.status import traits
from trainables.workloads import family

BASELINES = ("seeds", "base", "none")
SEEDS_BEFORE: dict[str, Any] = {
    "loop": "legacy", "precision": "fp32", "batch_size": 32, "workers": 1, "accum_steps": 1,
    "lr_scaling": "none", "compile": False, "channels_last": False,
}


def resolved_kind(spec) -> str:
    """The default: 'seeds' for a built-in workload, 'base' for a model or task of your own
    (the seeds' habits say nothing about your training)."""
    return spec.baseline or ("base" if spec.model is not None or spec.task is not None
                             else "seeds")


# What a recorded baseline (a baseline.json of an earlier search) must hold.
RECORD_FIELDS = ("kind", "config", "status", "val_score", "train_time_s")


def check_baseline(spec) -> None:
    if history_baseline.is_history(spec.baseline):  # it must exist and read as a curve now
        history_baseline.load(spec.baseline, spec.resolved_tracking_uri())
    elif spec.baseline is not None and spec.baseline not in BASELINES:
        load_record(spec.baseline)  # else a recorded baseline: it must read as one
    if spec.make_objective().needs_baseline and resolved_kind(spec) == "none":
        raise ValueError(f"objective {spec.objective!r} needs a baseline: use --baseline seeds "
                         "or --baseline base")


def load_record(path: str | Path) -> dict:
    """A baseline measured before (the `baseline.json` a search writes): a search given its path
    compares with it instead of running the baseline again."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"baseline must be one of {list(BASELINES)} or the path of a recorded "
                         f"baseline (a search's baseline.json); got {str(path)!r}")
    try:
        record = json.loads(file.read_text())
    except ValueError as err:
        raise ValueError(f"baseline {path}: not JSON ({err})") from None
    missing = [k for k in RECORD_FIELDS if not isinstance(record, dict) or k not in record]
    if missing:
        raise ValueError(f"baseline {path}: not a recorded baseline, missing {missing}")
    if not traits(record["status"]).rankable or \
            not all(math.isfinite(float(record[k])) for k in ("val_score", "train_time_s")):
        raise ValueError(f"baseline {path}: has no result ({record['status']})")
    return record


def baseline_config(kind: str, base: dict[str, Any],
                    own: dict[str, Any] | None = None) -> dict[str, Any]:
    """The baseline's full trial settings: the search's fixed settings, with the seeds' 'before'
    habits on top for 'seeds', and the baseline's own settings (`baseline_set`) last."""
    if kind != "seeds":
        return {**base, **(own or {})}
    config = {**base, **SEEDS_BEFORE}
    if family(base.get("workload")) == "unet3d":
        # The 3D seed's 'before' is fp32 at full width, no checkpointing, and the small batch a
        # volume workload runs at (batch 32 of volumes is nobody's habit and no step on few
        # volumes).
        config |= {"batch_size": 2, "width": 1.0, "grad_checkpointing": False}
    return {**config, **(own or {})}


def settings_of(spec, base: dict[str, Any]) -> dict[str, Any] | None:
    """What the baseline trains, known before any work: its settings as its run will have them
    (seeds, base), as recorded (a baseline.json) or as your run's params say (runs:/, a CSV);
    None without a baseline."""
    from trainables.config import TrialConfig

    kind = resolved_kind(spec)
    if kind == "none":
        return None
    if kind in BASELINES:
        config = baseline_config(kind, base, spec.baseline_set)
    elif history_baseline.is_history(kind):
        history = history_baseline.load(kind, spec.resolved_tracking_uri())
        config = history_baseline.config_of(history, base, spec.baseline_set)
    else:
        config = resolved_config(load_record(kind))
    known = set(TrialConfig.field_names())  # a record may hold fields this version lacks
    return {k: v for k, v in config.items() if k in known}


def lr_line(anchored: dict[str, Any]) -> str:
    """The note that the trials' lr is scaled from the baseline's (trainables/loop/lr.py:
    from_baseline)."""
    from trainables.config import TrialConfig

    rule = anchored.get("lr_scaling") or TrialConfig.lr_scaling
    return (f"  note: the trials' lr is the baseline's, {anchored['lr']:g} at batch "
            f"{anchored['lr_reference_batch']}, scaled ({rule}) to each trial's batch")


def baseline_epochs(spec, config: dict[str, Any]) -> int:
    """match_baseline asks for the accuracy of the user's real run: with `full_epochs` the
    baseline trains that long (the trials may then need as many epochs; the target stopper ends
    each once it is decided). Otherwise the baseline runs as long as a trial, and the others
    objectives compare projected full runs."""
    if spec.make_objective().needs_baseline and spec.full_epochs:
        return int(spec.full_epochs)
    return int(config.get("epochs", spec.epochs))


def record_of(kind: str, config: dict[str, Any], rec, parent_run_id: str | None,
              search: str | None = None, search_id: str | None = None) -> dict:
    """The baseline's record (what baseline.json keeps) from its trial's record; a baseline that
    did not run to a valid end is an error: there is nothing to compare with. `search`,
    `search_id`: the folder and id of the search that trained it."""
    m = rec.metrics
    score = _num(m.get("val_score"))
    reached = first_at(rec.curve, score)
    record = {
        "kind": kind, "config": config, "trial_id": rec.trial_id, "status": str(rec.status),
        "val_score": score, "train_time_s": _num(m.get("train_time_s")),
        "full_run_s": _num(m.get("full_run_s")), "epochs": rec.epochs, "curve": rec.curve,
        # S is the score of the whole run; when the run first reached it (for the curious: a
        # speedup compares with the whole run, the one the user makes).
        "time_to_score_s": reached.seconds if reached else _num(m.get("train_time_s")),
        "noise_scale": _num(m.get("noise_scale")), "noise": rec.noise, "losses": rec.losses,
        # Its process's warm-up before its clock, and the noise-scale probes outside it: the
        # search's, not the user's run.
        "first_use_s": m.get("first_use_s"), "noise_s": rec.noise_s,
        # Its step timed before its clock: the machine's speed that day (a search that takes
        # this run from history holds it against today's: orchestrator/history_baseline.py).
        "start_step_s": m.get("start_step_s"),
        "parent_run_id": parent_run_id, "search": search, "search_id": search_id,
    }
    if not traits(rec.status).rankable:
        raise RuntimeError(f"the {kind} baseline did not complete ({rec.status}: {rec.reason}); "
                           "fix it, or pass baseline='none' to search without one")
    return record


def describe(kind: str, config: dict[str, Any], base: dict[str, Any], epochs: int) -> str:
    """The header's baseline line: what runs first, and how it differs from the fixed settings."""
    if kind == "none":
        return "baseline: none"
    if history_baseline.is_history(kind):
        return (f"baseline: your run in {kind}, from its history (not trained again; its "
                "step timed here)")
    if kind not in BASELINES:
        return f"baseline: recorded in {kind} (compared with, not run again)"
    changed = {k: v for k, v in config.items() if base.get(k) != v}
    shown = " ".join(f"{k}={v}" for k, v in changed.items()) or "the fixed settings as given"
    return f"baseline: {kind}, run first for {epochs} epochs ({shown})"


def result_line(kind: str, record: dict, own: str | None = None) -> str:
    """'baseline (seeds): val_score 0.7490 in 49.1 s of training'; `kind` is the spec's (a path
    for a baseline recorded before); `own`: this search's id (a baseline an earlier search of
    the same question recorded says where)."""
    where = kind if kind in BASELINES else f"{record['kind']}, recorded in {kind}"
    if record.get("recorded_train_time_s") is not None:  # a baseline.json of another speed
        where += _scaled(record["drift"], _readings(record) + "; ",
                         record["recorded_train_time_s"])
    if record.get("kind") == "history":
        where = f"history, {kind}: " + _history_clock(record)
    if kind in BASELINES and own is not None and record.get("search_id") not in (None, own):
        where += f", recorded by {record['search']} (--rerun-baseline trains it again)"
    return (f"baseline ({where}): val_score {record['val_score']:.4f} in "
            f"{record['train_time_s']:.1f} s of training")


def _history_clock(record: dict) -> str:
    """Whose seconds a baseline from history is compared in (orchestrator/history_baseline.py)."""
    if record.get("clock") == history_baseline.TIMED_HERE:
        return (f"its step timed here; its recorded seconds from {record['seconds_from']} "
                "kept beside")
    said = "its recorded training time, this tool's on this machine kind"
    ratio = record.get("drift")
    if ratio is None:
        return said + " (the same clock)"
    if record["clock"] == "recorded":
        return said + f" (the same clock: {_readings(record)})"
    return said + _scaled(ratio, _readings(record) + "; ", record["history_seconds"][-1][2])


def _readings(record: dict) -> str:
    """Its step timed here against the one its seconds were on: every reading where the speed
    moved (each beyond the noise: history_baseline.moved)."""
    timed, then = record["timed_here"], record["recorded_step_s"]
    readings = timed.get("readings") or [timed["step_s"]]
    if record.get("clock") != history_baseline.SCALED or len(readings) < 2:
        return f"{timed['step_s']:.4f} s a step here against {then:.4f} s"
    return (f"{len(readings)} readings of its step here, {min(readings):.4f}-"
            f"{max(readings):.4f} s, against {then:.4f} s")


def _scaled(ratio: float, steps: str, recorded_s: float) -> str:
    """What a baseline held to today's speed says of it (orchestrator/history_baseline.py)."""
    return (f", scaled {ratio:.2f}x: this machine's speed moved since it ran ({steps}"
            f"{recorded_s:.1f} s as recorded)")


def resolved_config(record: dict) -> dict[str, Any]:
    """The baseline's configuration, every field resolved: the defaults it ran with included
    (a recorded baseline may hold fields this version lacks)."""
    from trainables.config import TrialConfig

    return {**TrialConfig().to_dict(), **record["config"]}


def baseline_objective(spec):
    """What the baseline trial reports besides its score and time: `full_run_s`, projected to
    `full_epochs` as the trials' are."""
    from orchestrator.objective import WeightedObjective

    return WeightedObjective(full_epochs=spec.full_epochs)


def with_baseline(objective, record: dict | None):
    """The objective, told the baseline's score and time. match_baseline compares the time to
    reach the baseline's score with the baseline's whole training time (its time to that score);
    the others compare projected full runs."""
    if record is None:
        return objective
    if objective.needs_baseline:
        return dataclasses.replace(objective, baseline_score=record["val_score"],
                                   baseline_s=record["train_time_s"])
    return dataclasses.replace(objective,
                               baseline_s=record.get("full_run_s") or record["train_time_s"])


def baseline_row(record: dict | None, knobs: list[str]) -> dict | None:
    """The leaderboard row of the baseline (role 'baseline', rank 0)."""
    if record is None:
        return None
    cfg = resolved_config(record)  # its values where it ran with the defaults
    return {"rank": 0, "trial_id": record.get("trial_id"), "status": record["status"],
            **{k: cfg.get(k) for k in knobs}, "planned_epochs": record.get("epochs"),
            "val_score": record["val_score"],
            "train_time_s": record["train_time_s"],
            "full_run_s": record.get("full_run_s") or record["train_time_s"],
            "speedup_vs_baseline": 1.0, "role": "baseline"}


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
