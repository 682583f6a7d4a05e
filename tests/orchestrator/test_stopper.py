"""A time-to-target trial stops once its objective is decided (orchestrator/stopper.py)."""

import math

from orchestrator.objective import make_objective
from orchestrator.stopper import TargetStopper, target_stopper


def _match(score=0.8, baseline_s=100.0):
    import dataclasses

    return dataclasses.replace(make_objective("match_baseline", tolerance=0.05),
                               baseline_score=score, baseline_s=baseline_s)


def test_only_time_to_target_objectives_get_a_stopper():
    assert target_stopper(make_objective("weighted")) is None
    assert target_stopper(make_objective("pareto")) is None
    assert isinstance(target_stopper(make_objective("time_to_target", target=0.7)), TargetStopper)
    assert isinstance(target_stopper(_match()), TargetStopper)


def test_a_trial_that_reached_the_target_stops_early_stopped():
    objective = _match()
    stopper = TargetStopper(objective)
    state: dict = {}
    first = objective({"val_score": 0.5, "train_time_s": 10.0, "epoch": 1, "status": "running"},
                      state)
    assert not stopper("t1", first)
    second = objective({"val_score": 0.76, "train_time_s": 20.0, "epoch": 2,
                        "status": "running"}, state)
    assert stopper("t1", second)
    status, reason = stopper.stopped["t1"]
    assert status == "early_stopped" and "0.7500 at epoch 2" in reason


def test_a_trial_slower_than_the_baseline_is_cut_there():
    objective = _match(baseline_s=30.0)
    stopper = TargetStopper(objective)
    state: dict = {}
    for epoch, t in enumerate((12.0, 24.0), 1):
        metrics = objective({"val_score": 0.6, "train_time_s": t, "epoch": epoch,
                             "status": "running"}, state)
        assert not stopper("slow", metrics)
    metrics = objective({"val_score": 0.7, "train_time_s": 36.0, "epoch": 3,
                         "status": "running"}, state)
    assert math.isnan(metrics["time_to_target_s"])
    assert stopper("slow", metrics)
    status, reason = stopper.stopped["slow"]
    assert status == "pruned" and "slower than the baseline" in reason


def test_time_to_target_has_no_baseline_to_be_slower_than():
    objective = make_objective("time_to_target", target=0.9)
    stopper = TargetStopper(objective)
    metrics = objective({"val_score": 0.5, "train_time_s": 1e6, "epoch": 1, "status": "running"},
                        {})
    assert not stopper("t", metrics)


def test_a_final_or_failed_result_is_left_alone():
    objective = _match()
    stopper = TargetStopper(objective)
    for status in ("completed", "diverged", "infeasible"):
        metrics = objective({"val_score": 0.9, "train_time_s": 1.0, "epoch": 1, "status": status},
                            {})
        assert not stopper(status, metrics)
    assert stopper.stopped == {}
