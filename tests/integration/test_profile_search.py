"""The speed profile through a real search (local Ray, a trial in its Tune process, MLflow in
SQLite): the picks reach the leaderboard, the best config and the trial's MLflow tags, and
profile_s is reported beside train_time_s. (With `workers: 2` the same test passes too, both
ranks summing their estimates with all_reduce, at ~60 s instead of ~30 s on 2 loaded cores.)

Run: python -m pytest -q tests/integration/test_profile_search.py
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search

pytestmark = pytest.mark.integration


def test_search_trains_with_the_profiles_picks_and_records_them(ray_session, tmp_path):
    from tests.conftest import make_npz, sqlite_store

    spec = SearchSpec(
        name="it-profile", data=make_npz(tmp_path / "tiny.npz"), baseline="none", epochs=1,
        num_trials=1, space={}, base={"batch_size": 16, "patch_size": 12, "width": 0.25},
        output_dir=str(tmp_path / "runs"), tracking_uri=sqlite_store(tmp_path))
    result = run_search(spec)
    row = result.trials.iloc[0]
    assert row["status"] == "completed"
    pick = bool(row["pick.channels_last"])
    assert result.best_config["channels_last"] is pick  # what the trial trained with
    assert row["profile_s"] > 0 and row["train_time_s"] > 0
    assert "pick.channels_last" in result.leaderboard(wide=True)
    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name("it-profile")
    child = [r for r in client.search_runs([exp.experiment_id])
             if r.data.tags.get("mlflow.parentRunId")][0]
    assert child.data.tags["pick.channels_last"] == str(pick).lower()
    assert child.data.metrics["final_profile_s"] == pytest.approx(row["profile_s"])
