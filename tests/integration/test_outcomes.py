"""Out of memory ends a trial the same way on both paths (the trial process, a Ray Train worker
group), is never retried, and steers the sampler away. Real Ray, Optuna and MLflow.
Run: python -m pytest -q tests/integration/test_outcomes.py"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search
from tests.conftest import make_npz, sqlite_store
from tests.integration.faults import OOM_WIDTH

pytestmark = pytest.mark.integration

MODEL = "tests.integration.faults:ooms_when_wide"
BASE = {"batch_size": 16, "patch_size": 12, "lr": 0.01, "workload": MODEL}


def _spec(root, name, **options) -> SearchSpec:
    return SearchSpec(name=name, baseline="none", data=make_npz(root / "tiny.npz"), seed=0,
                      output_dir=str(root / "runs"), tracking_uri=sqlite_store(root), **options)


def _children(spec: SearchSpec) -> dict:
    """The search's trial runs in MLflow, by trial id."""
    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name(spec.name)
    return {r.data.tags["orchestrator.trial_id"]: r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("mlflow.parentRunId")}


@pytest.fixture(scope="module")
def oom_region(ray_session, tmp_path_factory):
    """One search of 15 in-process trials where half the widths always run out of memory, and the
    widths of every model built in it (each trial's process adds to a counter actor)."""
    import ray

    from tests.integration.faults import build_counter

    counter = build_counter()  # held here, so it lives through the search
    ray.get(counter.reset.remote())
    spec = _spec(tmp_path_factory.mktemp("oom-region"), "oom-region", epochs=1, num_trials=15,
                 space={"width": [0.25, 0.5, 1.0, 2.0], "batch_size": [16, 32]},
                 base={k: v for k, v in BASE.items() if k != "batch_size"},
                 # Out of memory in training (the profile would time its own candidate models
                 # first: tests/trainables/test_profile_worker.py covers an OOM there).
                 profile="off",
                 # Every proposal trains: this counts what the sampler proposes (8 configs in 15
                 # trials repeat; the ledger would report repeats as duplicates).
                 rerun_duplicates=True)
    table = run_search(spec).trials
    return spec, table, ray.get(counter.get.remote())


def test_the_sampler_learns_to_avoid_an_out_of_memory_region(oom_region):
    """Half the widths always run out of memory: random sampling would propose them in 7.5 of
    15 trials; TPE, told they violate a constraint, clearly less often."""
    _, table, _ = oom_region
    wide = table[table["width"] >= OOM_WIDTH]
    assert len(table) == 15
    assert set(wide["status"]) <= {"infeasible"}
    assert len(wide) <= 5, table[["width", "batch_size", "status"]]
    assert set(table[table["width"] < OOM_WIDTH]["status"]) == {"completed"}


def test_out_of_memory_in_the_trial_process_is_infeasible_and_never_retried(oom_region):
    """The in-process path (one worker: the trial trains in its Tune process), on the wide
    trials of the same search."""
    spec, table, builds = oom_region
    wide = table[table["width"] >= OOM_WIDTH]
    assert len(wide) >= 1  # the seeded sampler's random start proposes a wide one
    assert set(wide["status"]) == {"infeasible"}
    assert all(reason.startswith("out of memory") for reason in wide["reason"]), wide["reason"]
    assert not wide["pareto"].any()
    # Tune tried none of the deterministic failures again: a wide trial built its model once
    # (its warm-up before the clock ran out of memory and ended it), every other one twice
    # (the warm-up's throwaway model, then the model it trained).
    expected = [w for w in table["width"] for _ in range(1 if w >= OOM_WIDTH else 2)]
    assert sorted(builds) == sorted(expected)
    children = _children(spec)
    for trial_id in wide["trial_id"]:
        run = children[trial_id]
        assert run.info.status == "FAILED" and run.data.tags["status"] == "infeasible"


def test_out_of_memory_in_a_worker_group_is_infeasible_and_never_retried(ray_session, tmp_path):
    """The worker-group path (2 workers, CPU allocator's error), in a Pareto search."""
    import ray

    from tests.integration.faults import build_counter

    counter = build_counter()
    ray.get(counter.reset.remote())
    spec = _spec(tmp_path, "oom-2", epochs=2, num_trials=1, space={}, objective="pareto",
                 base={**BASE, "width": OOM_WIDTH, "workers": 2})
    row = run_search(spec).trials.iloc[0]

    assert row["status"] == "infeasible"
    assert row["reason"].startswith("out of memory"), row["reason"]
    assert not row["pareto"]
    # Built once per worker: neither Train nor Tune tried the deterministic failure again.
    assert ray.get(counter.get.remote()) == [OOM_WIDTH] * 2
    (child,) = _children(spec).values()
    assert child.info.status == "FAILED" and child.data.tags["status"] == "infeasible"
