"""Every trial Tune creates is accounted for, and no configuration is trained twice.

Real Ray, real Optuna, real MLflow; trial order is pinned with warm-start points.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search
from orchestrator.records import read_journal
from tests.conftest import sqlite_store

pytestmark = pytest.mark.integration

BASE = {"batch_size": 16, "patch_size": 12, "sync_every": 2}


def _spec(root, data, name, **options):
    return SearchSpec(name=name, baseline="none", data=data, output_dir=str(root / "runs"),
                      tracking_uri=sqlite_store(root), seed=0, base=BASE,
                      **options)


def _child_runs(uri: str, name: str) -> list:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    return [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("mlflow.parentRunId")]


def test_failed_before_first_report_and_duplicate_are_rows(ray_session, tmp_path):
    from tests.conftest import make_npz
    from trainables.models import build_classifier

    attempts = tmp_path / "attempts"

    def flaky_once(cfg, meta):
        # Fails while the first trial builds its model (before any report; the search's dry
        # run of the model, in the driver, built it once before); then builds. The failure is
        # not the configuration's, and it is not retried (only a lost worker is).
        tries = len(attempts.read_text()) if attempts.exists() else 0
        attempts.write_text("x" * (tries + 1))
        if tries == 1:
            raise RuntimeError(f"the model store is not mounted yet (try {tries + 1})")
        return build_classifier(cfg, meta)

    data = make_npz(tmp_path / "tiny.npz")
    # One configuration only: every suggestion repeats it. Trial 1 fails, so trial 2 trains it;
    # trial 3 is a duplicate of trial 2.
    spec = _spec(tmp_path, data, "accounting", model=flaky_once, epochs=1, num_trials=3,
                 space={"width": [0.5], "lr": [0.01]})
    out = io.StringIO()
    result = run_search(spec, out=out)

    table = result.trials
    assert len(table) == 3, out.getvalue()
    assert sorted(table["status"]) == ["completed", "duplicate", "failed"], out.getvalue()
    failed = table[table["status"] == "failed"].iloc[0]
    assert "the model store is not mounted yet (try 2)" in failed["reason"]
    done = table[table["status"] == "completed"].iloc[0]
    dup = table[table["status"] == "duplicate"].iloc[0]
    assert (dup["width"], dup["lr"]) == (done["width"], done["lr"]) == (0.5, 0.01)
    # The duplicate reports the first run's result; it did not train.
    assert dup["val_score"] == done["val_score"] and dup["objective"] == done["objective"]
    assert "same knobs and seed as trial 2" in dup["reason"]
    assert result.best["trial_id"] == done["trial_id"]  # a duplicate never ranks
    assert "3 trials: 1 completed, 1 duplicate, 1 failed" in out.getvalue()

    finished, cut_short = read_journal(Path(result.output_dir, "trials.jsonl"))
    assert sorted(rec.status for rec in finished.values()) == \
        ["completed", "duplicate", "failed"] and not cut_short
    runs = _child_runs(spec.tracking_uri, "accounting")
    assert sorted((r.data.tags["status"], r.info.status) for r in runs) == \
        [("completed", "FINISHED"), ("duplicate", "FINISHED"), ("failed", "FAILED")]


def test_rerun_duplicates_trains_the_repeat(ray_session, tmp_path):
    from tests.conftest import make_npz

    data = make_npz(tmp_path / "tiny.npz")
    point = {"width": 0.25, "lr": 0.01}
    spec = _spec(tmp_path, data, "rerun", epochs=1, num_trials=2, rerun_duplicates=True,
                 space={"width": [0.25, 0.5], "lr": [0.01, 0.02]}, warm_start=[point, point])
    result = run_search(spec, out=io.StringIO())
    assert list(result.trials["status"]) == ["completed", "completed"]


def test_time_budget_ends_a_running_trial_pruned_with_its_metrics(ray_session, tmp_path):
    from tests.conftest import make_npz

    data = make_npz(tmp_path / "tiny.npz")
    # 20000 epochs cannot finish in the budget; a few do, and report. The first report comes
    # ~6 s after Tune starts on an idle 2-core machine (the trial's process starts and imports
    # torch), and took over 12 s beside another training: the budget leaves 5x for that.
    spec = _spec(tmp_path, data, "budget", epochs=20000, num_trials=1, time_budget_s=30,
                 space={}, warm_start=None)
    out = io.StringIO()
    result = run_search(spec, out=out)

    assert len(result.trials) == 1
    row = result.trials.iloc[0]
    assert row["status"] == "pruned", out.getvalue()
    assert 1 <= row["epochs"] < 20000
    assert not math.isnan(row["val_score"]) and not math.isnan(row["train_time_s"])
    assert "1 trial: 1 pruned" in out.getvalue()
    (run,) = _child_runs(spec.tracking_uri, "budget")
    assert run.data.tags["status"] == "pruned" and run.info.status == "KILLED"
    assert "val_score" in run.data.metrics
