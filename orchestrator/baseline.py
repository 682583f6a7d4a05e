"""The baseline trial: what the user runs today, run first, so every trial says how much faster
it is (issue 17, item 1).

    seeds  the legacy loop with the seed write-ups' 'before' habits: fp32, batch 32, one
           worker, DataLoader, a fixed lr (no scaling), no compile, no channels_last
    base   the search's fixed settings (`base`) as they are: what you run today
    none   no baseline
    PATH   a baseline measured before: the `baseline.json` of an earlier search (not run again)

It runs as a one-trial search of its own (same data, same MLflow experiment, its folder
`<output_dir>/<name>/baseline/`) before the search, outside `num_trials`. Its MLflow parent run
is tagged `orchestrator.role=baseline` and its trial run `baseline=true`; the leaderboard gets a
row with `role=baseline`; `baseline.json` in the search folder keeps its config and result.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, TextIO

BASELINES = ("seeds", "base", "none")
SEEDS_BEFORE: dict[str, Any] = {
    "loop": "legacy", "precision": "fp32", "batch_size": 32, "workers": 1, "accum_steps": 1,
    "lr_scaling": "none", "compile": False, "channels_last": False,
}
BASELINE_FILE = "baseline.json"


def resolved_kind(spec) -> str:
    """The default: 'seeds' for a built-in workload, 'base' for a model of your own (the seeds'
    habits say nothing about your model)."""
    return spec.baseline or ("base" if spec.model is not None else "seeds")


# What a recorded baseline (a baseline.json of an earlier search) must hold.
RECORD_FIELDS = ("kind", "config", "status", "val_score", "train_time_s")


def check_baseline(spec) -> None:
    if spec.baseline is not None and spec.baseline not in BASELINES:
        load_record(spec.baseline)  # else a recorded baseline: it must read as one
    if spec.objective == "match_baseline" and resolved_kind(spec) == "none":
        raise ValueError("objective 'match_baseline' needs a baseline: use --baseline seeds "
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
    if record["status"] not in ("completed", "early_stopped") or \
            not all(math.isfinite(float(record[k])) for k in ("val_score", "train_time_s")):
        raise ValueError(f"baseline {path}: has no result ({record['status']})")
    return record


def baseline_config(kind: str, base: dict[str, Any]) -> dict[str, Any]:
    """The baseline's full trial settings: the search's fixed settings, with the seeds' 'before'
    habits on top for 'seeds'."""
    if kind != "seeds":
        return dict(base)
    config = {**base, **SEEDS_BEFORE}
    if base.get("workload") == "unet3d":
        # The 3D seed's 'before' is fp32 at full width, no checkpointing, and the small batch a
        # volume workload runs at (batch 32 of volumes is nobody's habit and no step on few
        # volumes).
        config |= {"batch_size": 2, "width": 1.0, "grad_checkpointing": False}
    return config


def baseline_epochs(spec, config: dict[str, Any]) -> int:
    """match_baseline asks for the accuracy of the user's real run: with `full_epochs` the
    baseline trains that long (the trials may then need as many epochs; the target stopper ends
    each once it is decided). Otherwise the baseline runs as long as a trial, and the others
    objectives compare projected full runs."""
    if spec.objective == "match_baseline" and spec.full_epochs:
        return int(spec.full_epochs)
    return int(config.get("epochs", spec.epochs))


def run_baseline(spec, base: dict[str, Any], out_dir: Path, out: TextIO, run_search,
                 resume: bool = False) -> dict | None:
    """Run the baseline as a one-trial search (`run_search`, passed in by the search driver so
    this module stays below it); returns its record (also in baseline.json), or None for
    'none'. Runs inside the caller's Ray session. A resumed search reuses the record its first
    driver wrote."""
    kind = resolved_kind(spec)
    if kind == "none":
        return None
    if resume and (out_dir / BASELINE_FILE).is_file():
        return json.loads((out_dir / BASELINE_FILE).read_text())
    if kind not in BASELINES:  # measured before: compare with it, do not run it again
        record = load_record(kind)
        (out_dir / BASELINE_FILE).write_text(json.dumps(record, indent=2, default=str))
        print(f"baseline (recorded in {kind}): val_score {record['val_score']:.4f} in "
              f"{record['train_time_s']:.1f} s of training", file=out, flush=True)
        return record
    config = baseline_config(kind, base)
    sub = dataclasses.replace(
        spec, space={}, base=config, epochs=baseline_epochs(spec, config),
        num_trials=1, baseline="none", objective="weighted", target=None, warm_start=None,
        early_stopping=False, time_budget_s=None, output_dir=str(out_dir / "baseline"),
        profile="off")  # the baseline runs as given: what you run today
    print(f"baseline ({kind}): {_short(config, base)}", file=out, flush=True)
    result = run_search(sub, out=out)
    row = result.trials.iloc[0].to_dict() if not result.trials.empty else {}
    record = {
        "kind": kind, "config": config, "trial_id": row.get("trial_id"),
        "status": row.get("status"), "val_score": _num(row.get("val_score")),
        "train_time_s": _num(row.get("train_time_s")), "full_run_s": _num(row.get("full_run_s")),
        "parent_run_id": result.parent_run_id,
    }
    if record["status"] not in ("completed", "early_stopped"):
        raise RuntimeError(f"the {kind} baseline did not complete ({record['status']}: "
                           f"{row.get('reason')}); fix it or pass baseline='none'")
    _tag_runs(result.tracking_uri, result.parent_run_id)
    (out_dir / BASELINE_FILE).write_text(json.dumps(record, indent=2, default=str))
    print(f"baseline ({kind}): val_score {record['val_score']:.4f} in "
          f"{record['train_time_s']:.1f} s of training", file=out, flush=True)
    return record


def with_baseline(objective, record: dict | None):
    """The objective, told the baseline's score and time. match_baseline compares the time to
    reach the baseline's score with the baseline's whole training time (its time to that score);
    the others compare projected full runs."""
    if record is None:
        return objective
    if objective.name == "match_baseline":
        return dataclasses.replace(objective, baseline_score=record["val_score"],
                                   baseline_s=record["train_time_s"])
    return dataclasses.replace(objective,
                               baseline_s=record.get("full_run_s") or record["train_time_s"])


def baseline_row(record: dict | None, knobs: list[str]) -> dict | None:
    """The leaderboard row of the baseline (role 'baseline', rank 0)."""
    if record is None:
        return None
    cfg = record["config"]
    return {"rank": 0, "trial_id": record.get("trial_id"), "status": record["status"],
            **{k: cfg.get(k) for k in knobs}, "val_score": record["val_score"],
            "train_time_s": record["train_time_s"],
            "full_run_s": record.get("full_run_s") or record["train_time_s"],
            "speedup_vs_baseline": 1.0, "role": "baseline"}


def _tag_runs(tracking_uri: str, parent_run_id: str | None) -> None:
    """Mark the baseline's runs in MLflow, so they are not taken for a search or a trial."""
    if not parent_run_id:
        return
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri)
        client.set_tag(parent_run_id, "orchestrator.role", "baseline")
        exp = client.get_run(parent_run_id).info.experiment_id
        for run in client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent_run_id}'"):
            client.set_tag(run.info.run_id, "baseline", "true")
    except Exception as err:  # a tag is not worth losing the search over
        print(f"baseline: could not tag its MLflow runs ({err})")


def _short(config: dict, base: dict) -> str:
    changed = {k: v for k, v in config.items() if base.get(k) != v}
    return " ".join(f"{k}={v}" for k, v in changed.items()) or "the fixed settings as given"


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
