"""A Train worker killed mid-trial (SIGKILL) restarts from its last checkpoint, and the trial's
result and MLflow run say so. Run: python -m pytest -q tests/integration/test_worker_faults.py"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("workers", [2, 1], ids=["train-worker-group", "in-process-trial"])
def test_killed_worker_resumes_from_checkpoint(ray_session, tmp_path, workers, monkeypatch):
    """2 workers: a Ray Train worker dies and the group restarts from its checkpoint; its data
    come through Ray Train's split here (what a training set too big to cut gets: each attempt
    splits it afresh), the cut shares' restart is the cluster rehearsal's lost node. 1 worker:
    the trial trains in its Tune process, which dies; Tune's FailureConfig restarts it."""
    import trainables.data.pipeline as pipeline
    from tests.conftest import make_npz, sqlite_store

    monkeypatch.setattr(pipeline, "PRESPLIT_SHARE", 0.0)

    spec = SearchSpec(
        name="it-faults", data=make_npz(tmp_path / "tiny.npz"), epochs=3, num_trials=1,
        space={}, output_dir=str(tmp_path / "runs"), baseline="none",
        profile="off",  # what restarts, not what the profile picks (it would time each attempt)
        tracking_uri=sqlite_store(tmp_path),
        base={"batch_size": 16, "lr": 0.01, "patch_size": 12, "width": 0.25,
              "checkpoint_every": 1, "workload": "tests.integration.faults:dies_once",
              "workers": workers},
    )
    result = run_search(spec)

    row = result.trials.iloc[0]
    assert row["status"] == "completed", row["reason"]
    assert row["epochs"] == 3
    assert row["restarts"] >= 1  # resumed from a checkpoint, not started over

    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name("it-faults")
    (child,) = [r for r in client.search_runs([exp.experiment_id])
                if r.data.tags.get("mlflow.parentRunId")]
    assert child.info.status == "FINISHED"
    assert child.data.tags["restarted"] == "true"
    assert int(child.data.tags["restarts"]) >= 1
    assert child.data.metrics["final_restarts"] >= 1
    # The resumed attempt continued at epoch 2: epoch 1 was not trained twice.
    history = client.get_metric_history(child.info.run_id, "restarts")
    assert {m.step: m.value for m in history}[1] == 0
