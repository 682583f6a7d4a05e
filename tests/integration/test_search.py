"""A real 2-trial search: local Ray (shared), a trial in its Tune process and one on Ray Train
workers, Optuna, MLflow in SQLite."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search, train_config

pytestmark = pytest.mark.integration

TINY_BASE = {"batch_size": 16, "lr": 0.01, "patch_size": 12}


@pytest.fixture(scope="module")
def search(ray_session, tmp_path_factory):
    from tests.conftest import make_npz, sqlite_store

    root = tmp_path_factory.mktemp("search")
    data = make_npz(root / "tiny.npz")
    spec = SearchSpec(
        name="it-search", data=data, baseline="none", epochs=2, num_trials=2, seed=1,
        space={"width": [0.25, 0.5], "workers": [1, 2]}, base=TINY_BASE,
        # One trial on each path: in its Tune process, and a Ray Train worker group (unpinned,
        # this seed's sampler picked 2 workers for both).
        warm_start=[{"width": 0.5, "workers": 1}, {"width": 0.25, "workers": 2}],
        profile="off",  # tests/integration/test_profile_search.py runs a search with it
        output_dir=str(root / "runs"), tracking_uri=sqlite_store(root),
    )
    return spec, run_search(spec)


def test_result_table_and_best_config(search):
    spec, result = search
    table = result.trials
    assert len(table) == 2 and list(table["rank"]) == [1, 2]
    assert set(table["status"]) == {"completed"}
    assert {"width", "workers", "val_score", "train_time_s", "samples_per_s",
            "objective"} <= set(table.columns)
    assert table["objective"].is_monotonic_decreasing
    assert result.best["trial_id"] == table.iloc[0]["trial_id"]
    saved = json.loads(open(result.best_config_path).read())
    assert saved["config"] == result.best_config
    assert saved["config"]["width"] == result.best["width"]
    assert saved["config"]["batch_size"] == 16 and saved["data"] == spec.data
    # Time is measured inside the workers: a trial's wall time also pays Ray's fixed cost.
    for _, row in table.iterrows():
        assert 0 < row["train_time_s"] < row["trial_wall_s"]
        assert row["fixed_cost_s"] > 0


def test_mlflow_holds_parent_and_child_runs(search):
    spec, result = search
    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name("it-search")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.run_id == result.parent_run_id
    assert parents[0].info.status == "FINISHED"
    assert len(children) == 2
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {result.parent_run_id}
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["status"] == "completed"
        assert {"width", "workers"} <= set(child.data.params)
        history = client.get_metric_history(child.info.run_id, "val_accuracy")
        assert sorted(m.step for m in history) == [1, 2]
        for key in ("final_val_accuracy", "final_train_time_s", "final_objective",
                    "final_samples_per_s"):
            assert key in child.data.metrics
    best = [c for c in children if c.data.tags.get("best_trial") == "true"]
    assert len(best) == 1
    artifacts = {a.path for a in client.list_artifacts(result.parent_run_id)}
    assert {"leaderboard.csv", "best_config.json", "spec.yaml", "objective.txt"} <= artifacts


def test_best_config_reruns_with_train(search, tmp_path):
    spec, result = search
    rerun = train_config(result.best_config_path, epochs=1, profile="off",
                         output_dir=str(tmp_path / "runs"), tracking_uri=spec.tracking_uri)
    assert len(rerun.trials) == 1 and rerun.trials.iloc[0]["status"] == "completed"
    assert rerun.best_config == {**result.best_config, "epochs": 1}
    assert MlflowClient(spec.tracking_uri).get_experiment_by_name("it-search-train") is not None


def test_ray_datas_stats_actor_outlives_the_search(search):
    """init_ray makes it from the driver. A trial that made it (its first epoch, on first use
    of a dataset) put it in its own placement group, which took it down when the Tune run
    ended, and the next Tune run's first trial made it again."""
    import ray
    from ray.data._internal.stats import STATS_ACTOR_NAME, STATS_ACTOR_NAMESPACE
    from ray.util.state import get_actor

    handle = ray.get_actor(STATS_ACTOR_NAME, namespace=STATS_ACTOR_NAMESPACE)
    # This session's own Ray, by its address: auto-detection fails while another local Ray
    # runs beside it (the background stories', when this test runs early).
    state = get_actor(handle._actor_id.hex(), address=ray.get_runtime_context().gcs_address)
    assert state.state == "ALIVE" and not state.placement_group_id, state


def test_a_local_rays_settings_reach_its_workers_not_the_callers_environment(search):
    """init_ray gives the Ray it starts its settings through the environment its processes
    inherit, not a job runtime env, which no worker the raylet prestarts would match: they
    would idle to the end and each actor wait for a fresh worker. The caller's own environment
    is left as it was."""
    import os

    import ray

    from orchestrator.resources import LOCAL_RAY_ENV

    @ray.remote(num_cpus=0)
    class Probe:
        def read(self) -> tuple[dict, dict]:
            names = (*LOCAL_RAY_ENV, "RAY_API_SERVER_ADDRESS")
            return ({n: os.environ.get(n) for n in names},
                    dict(ray.get_runtime_context().runtime_env))

    probe = Probe.remote()
    seen, runtime_env = ray.get(probe.read.remote())
    ray.kill(probe)
    assert {n: seen[n] for n in LOCAL_RAY_ENV} == LOCAL_RAY_ENV
    address = seen["RAY_API_SERVER_ADDRESS"]
    assert address and address.startswith("http://127.0.0.1:")
    assert "env_vars" not in runtime_env, runtime_env
    # Set only while Ray started (the session sets RAY_ENV itself: tests/conftest.py).
    assert "RAY_API_SERVER_ADDRESS" not in os.environ
    assert "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER" not in os.environ
