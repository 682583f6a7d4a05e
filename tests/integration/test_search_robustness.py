"""The search stays trustworthy when trials misbehave: real Ray, real Optuna, real MLflow.

Trial order is pinned with warm-start points, so each test knows which trial does what.
"""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search
from tests.conftest import sqlite_store

pytestmark = pytest.mark.integration

BASE = {"batch_size": 16, "patch_size": 12, "sync_every": 2}


def _spec(root, data, name, **options):
    return SearchSpec(name=name, data=data, output_dir=str(root / "runs"),
                      baseline="none",  # these tests are about trials, not the baseline
                      tracking_uri=sqlite_store(root), seed=0, **options)


def test_oom_and_divergence_are_statuses_and_the_search_goes_on(ray_session, tmp_path):
    from tests.conftest import make_npz
    from trainables.models import build_classifier

    def oom_when_wide(cfg, meta):
        model = build_classifier(cfg, meta)
        if cfg.width >= 1.0:
            def explode(module, inputs):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
            model.register_forward_pre_hook(explode)
        return model

    data = make_npz(tmp_path / "tiny.npz")
    spec = _spec(tmp_path, data, "robust", model=oom_when_wide, epochs=2, num_trials=3,
                 space={"width": [0.5, 1.0], "lr": [0.01, 1.0e6]}, base=BASE,
                 warm_start=[{"width": 0.5, "lr": 0.01}, {"width": 1.0, "lr": 0.01},
                             {"width": 0.5, "lr": 1.0e6}])
    result = run_search(spec)
    by_config = {(r.width, r.lr): r for r in result.trials.itertuples()}
    assert by_config[(0.5, 0.01)].status == "completed"
    assert by_config[(1.0, 0.01)].status == "infeasible"
    assert "out of memory" in by_config[(1.0, 0.01)].reason
    assert by_config[(0.5, 1.0e6)].status == "diverged"
    assert "NaN or inf" in by_config[(0.5, 1.0e6)].reason
    assert result.best["status"] == "completed" and result.best["width"] == 0.5

    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name("robust")
    runs = {r.data.tags.get("orchestrator.trial_id"): r
            for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("mlflow.parentRunId")}
    statuses = {(r.data.tags["status"], r.info.status) for r in runs.values()}
    assert statuses == {("completed", "FINISHED"), ("infeasible", "FAILED"), ("diverged", "FAILED")}
    assert all("failure_reason" in r.data.tags for r in runs.values()
               if r.data.tags["status"] != "completed")


def test_early_stopping_prunes_a_trailing_trial(ray_session, tmp_path):
    from tests.conftest import make_npz

    data = make_npz(tmp_path / "tiny.npz")
    spec = _spec(tmp_path, data, "asha", epochs=3, num_trials=3, early_stopping=True,
                 grace_period=1, reduction_factor=2, space={"lr": [0.01, 1.0e-7]},
                 base={**BASE, "width": 0.25},
                 warm_start=[{"lr": 0.01}, {"lr": 0.01}, {"lr": 1.0e-7}])
    result = run_search(spec)
    statuses = dict(zip(result.trials["lr"], result.trials["status"]))
    assert statuses[1.0e-7] == "pruned"
    pruned = result.trials[result.trials["status"] == "pruned"].iloc[0]
    assert pruned["epochs"] < 3
    assert result.best["lr"] == 0.01


def test_pareto_search_marks_the_front(ray_session, tmp_path):
    import pandas as pd

    from tests.conftest import make_npz

    data = make_npz(tmp_path / "tiny.npz")
    spec = _spec(tmp_path, data, "pareto", objective="pareto", epochs=1, num_trials=3,
                 space={"width": [0.25, 0.5, 1.0]}, base=BASE)
    result = run_search(spec)
    front = pd.read_csv(result.pareto_path, dtype={"trial_id": str})  # "76264360" is an id, not a number
    assert 1 <= len(front) <= 3
    assert set(front["trial_id"]) == set(result.trials[result.trials["pareto"]]["trial_id"])
    for _, row in result.trials.iterrows():  # nobody on the front is beaten on both axes
        if row["pareto"]:
            beaten = result.trials[(result.trials["val_score"] > row["val_score"])
                                   & (result.trials["train_time_s"] < row["train_time_s"])]
            assert beaten.empty
