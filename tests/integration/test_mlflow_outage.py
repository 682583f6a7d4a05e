"""A real 3-trial search logging to a real `mlflow server` over HTTP, which goes down after the
first trial starts and comes back seconds later: the search carries on, and MLflow ends up with
every run complete, once. Run: python -m pytest -q tests/integration/test_mlflow_outage.py
"""

from __future__ import annotations

import io
import threading
import time

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search
from orchestrator.tracking import MlflowTracker

pytestmark = [pytest.mark.integration, pytest.mark.mlflow_server]

TINY_BASE = {"batch_size": 16, "patch_size": 12, "width": 0.25, "workers": 1}


def _outage(server, tracker, seen: dict, down_s: float = 4.0) -> None:
    """Stop the server once the first trial has started; start it again once the search has
    held a record back (its next event came during the outage) and a few seconds have passed."""
    try:
        deadline = time.time() + 120
        while not any(s.op == "start_trial" for s in list(tracker.outbox.journal)):
            if time.time() > deadline:
                return
            time.sleep(0.2)
        server.stop()
        # Down until a record is held (timing on a loaded machine varies), and at least down_s.
        up_after, deadline = time.time() + down_s, time.time() + 120
        while time.time() < deadline and (time.time() < up_after or not seen.get("held")):
            seen["held"] = max(seen.get("held", 0), tracker.outbox.pending)
            time.sleep(0.2)
    finally:
        if not server.running:
            server.start()
    seen["restarted"] = True


def test_search_goes_on_through_a_server_outage(ray_session, mlflow_server, tmp_path):
    from tests.conftest import make_npz

    spec = SearchSpec(
        name="it-outage-search", data=make_npz(tmp_path / "tiny.npz"), epochs=2, num_trials=3,
        seed=1, space={"lr": [0.005, 0.01, 0.02]}, base=TINY_BASE,
        output_dir=str(tmp_path / "runs"), tracking_uri=mlflow_server.uri, baseline="none",
    )
    said = io.StringIO()
    # A long retry window: on a loaded machine the restarted server may come up only after the
    # search has ended; the search must then wait for it rather than fall back.
    tracker = MlflowTracker(mlflow_server.uri, fallback_dir=tmp_path / "fallback", out=said,
                            retry_window_s=240)
    seen: dict = {}
    outage = threading.Thread(target=_outage, args=(mlflow_server, tracker, seen))
    outage.start()
    try:
        result = run_search(spec, out=io.StringIO(), tracker=tracker)
    finally:
        outage.join()

    assert seen.get("restarted") and seen.get("held", 0) > 0, "no record was held in the outage"
    assert "unreachable" in said.getvalue() and "still unreachable" not in said.getvalue()
    assert result.tracking_uri == mlflow_server.uri
    assert set(result.trials["status"]) == {"completed"}

    client = MlflowClient(mlflow_server.uri)
    exp = client.get_experiment_by_name("it-outage-search")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    children = [r for r in runs if r.data.tags.get("orchestrator.role") == "trial"]
    assert len(parents) == 1 and parents[0].info.run_id == result.parent_run_id
    assert parents[0].info.status == "FINISHED"
    assert len(children) == 3
    assert {c.data.tags["orchestrator.trial_id"] for c in children} == set(result.trials.trial_id)
    for child in children:
        tags = child.data.tags
        assert child.info.status == "FINISHED" and tags["status"] == "completed"
        assert tags["mlflow.parentRunId"] == result.parent_run_id
        assert tags["best_trial"] in ("true", "false") and tags["pareto"] in ("true", "false")
        assert {"env.torch", "env.ray", "env.optuna", "env.device", "env.git_sha"} <= set(tags)
        assert "lr" in child.data.params
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "val_accuracy")]
        assert sorted(steps) == [1, 2]
        assert {"final_val_accuracy", "final_train_time_s", "final_objective"} \
            <= set(child.data.metrics)
    assert sum(c.data.tags["best_trial"] == "true" for c in children) == 1
    assert any(c.data.tags["pareto"] == "true" for c in children)
    artifacts = {a.path for a in client.list_artifacts(result.parent_run_id)}
    assert {"spec.yaml", "search_space.json", "objective.txt", "leaderboard.csv",
            "best_config.json", "pareto.png"} <= artifacts
