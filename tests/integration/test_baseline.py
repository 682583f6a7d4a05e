"""Issue 17 end to end: a seeds baseline runs first, outside the trial count, and a
match_baseline search ranks its trials against it (real Ray, Optuna, MLflow in SQLite)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search
from orchestrator.cli import print_summary

pytestmark = pytest.mark.integration


def test_seeds_baseline_then_match_baseline_search(ray_session, tmp_path):
    from tests.conftest import make_npz, sqlite_store

    spec = SearchSpec(
        name="it-headline", data=make_npz(tmp_path / "tiny.npz"), epochs=2, num_trials=3,
        seed=2, space={"width": [0.25, 0.5], "precision": ["fp32", "bf16-mixed"]},
        base={"batch_size": 16, "lr": 0.01, "patch_size": 12, "loader_workers": 0},
        objective="match_baseline", tolerance=0.05, full_epochs=10,
        output_dir=str(tmp_path / "runs"), tracking_uri=sqlite_store(tmp_path))
    result = run_search(spec, out=io.StringIO())
    _assert_no_ledger_left()

    # The baseline ran first, with the seeds' habits, and is not one of the 3 trials.
    base = result.baseline
    assert base["kind"] == "seeds" and base["status"] == "completed"
    assert base["config"]["loop"] == "legacy" and base["config"]["batch_size"] == 32
    saved = json.loads((Path(result.output_dir) / "baseline.json").read_text())
    assert saved["val_score"] == pytest.approx(base["val_score"])
    table = result.trials
    assert (table["role"] == "baseline").sum() == 1 and (table["role"] == "trial").sum() == 3
    assert table.iloc[0]["role"] == "trial"  # the best is a trial, never the baseline

    # Every trial carries its projected full run and a speedup where it matched the baseline.
    trials = table[table["role"] == "trial"]
    assert trials["full_run_s"].gt(trials["train_time_s"]).all()  # 10 epochs, not 2
    target = base["val_score"] - 0.05
    for _, row in trials.iterrows():
        reached = row["objective"] > -1e5
        assert reached == (not math.isnan(row["speedup_vs_baseline"]))
        if reached:
            assert row["speedup_vs_baseline"] == pytest.approx(
                base["train_time_s"] / -row["objective"])  # its whole run, as the user runs it
    # A trial stops as soon as its time to the target is decided (orchestrator/stopper.py).
    for _, row in trials.iterrows():
        # (`duplicate`: TPE may propose a configuration of this 4-point space twice.)
        assert row["status"] in ("completed", "early_stopped", "pruned", "duplicate"), \
            row.to_dict()
        if row["status"] == "early_stopped":
            assert row["reason"].startswith("reached the target") and row["epochs"] < 2
        if row["status"] == "pruned":  # it could no longer win: the bar it passed, or will
            fastest = trials["time_to_target_s"].min()  # a trial that reached the target first
            if row["reason"].startswith("slower than the baseline"):
                assert row["train_time_s"] >= base["train_time_s"]
            elif row["reason"].startswith("slower than the fastest trial"):
                assert row["train_time_s"] >= fastest
            elif row["reason"].startswith("behind the baseline's learning curve"):
                # cut as the screen's confirmations are: the reference is measured alike
                assert row["epochs"] >= 1
            else:  # its twin (the other precision) is decided: its own pace projects past it
                assert row["reason"].startswith("projected slower than the fastest"), row["reason"]
    ranked = trials[trials["status"].isin(["completed", "early_stopped"])]["objective"].tolist()
    assert ranked == sorted(ranked, reverse=True)
    assert f"{base['val_score']:.4f} - 0.05" in result.objective_formula
    assert "role" in pd.read_csv(result.leaderboard_path).columns

    # The summary says how the answer, trained as handed over, compares (economics.json);
    # MLflow marks the baseline's runs.
    printed = io.StringIO()
    print_summary(result, out=printed)
    economics = result.economics
    assert economics is not None and economics["target"] == pytest.approx(target)
    if economics["speedup"] is not None:
        assert "speedup" in printed.getvalue()
        assert economics["speedup"] == pytest.approx(base["train_time_s"] /
                                                     economics["found_s"])
    else:
        assert "nothing reached the baseline's score" in printed.getvalue()
    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name("it-headline")
    runs = client.search_runs([exp.experiment_id])
    # One search: one parent run, the baseline a child of it (not a nested search).
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    assert len(parents) == 1 and parents[0].info.run_id == result.parent_run_id
    marked = [r for r in runs if r.data.tags.get("baseline") == "true"]
    assert len(marked) == 1 and marked[0].data.tags["orchestrator.role"] == "baseline"
    assert marked[0].data.tags["mlflow.parentRunId"] == base["parent_run_id"] \
        == result.parent_run_id
    assert marked[0].data.tags["orchestrator.trial_id"] == base["trial_id"]
    trial_runs = [r for r in runs if r.data.tags.get("orchestrator.role") == "trial"]
    assert len(trial_runs) == 3 and "baseline" not in {r.data.tags.get("baseline")
                                                       for r in trial_runs}
    assert all("final_full_run_s" in r.data.metrics for r in trial_runs)
    # One folder: no search of its own under the search's folder.
    assert not (Path(result.output_dir) / "baseline").exists()
    assert len(base["curve"]) == base["epochs"] == 10  # its learning curve, epoch by epoch


def _assert_no_ledger_left(timeout_s: float = 20.0) -> None:
    """Each search (the baseline is one) kills its duplicate ledger actor when it ends: a
    session that runs many searches (a notebook, this test suite) keeps none of them."""
    import time

    import ray
    from ray.util.state import list_actors

    address = ray.get_runtime_context().gcs_address

    deadline = time.time() + timeout_s
    while True:
        alive = list_actors(address=address, filters=[("class_name", "=", "Ledger"), ("state", "=", "ALIVE")])
        if not alive or time.time() > deadline:
            break
        time.sleep(0.5)
    assert not alive, alive
