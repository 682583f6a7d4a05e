"""Objectives are pure functions of a trial's reports: tested without Ray."""

from __future__ import annotations

import math

import pytest

from orchestrator.objective import TimeToTargetObjective, WeightedObjective, make_objective


def test_weighted_objective_formula():
    obj = WeightedObjective(time_weight=0.05, reference_time_s=10)
    assert obj({"val_score": 0.9, "train_time_s": 10})["objective"] == pytest.approx(0.9)
    assert obj({"val_score": 0.9, "train_time_s": 20})["objective"] == pytest.approx(0.85)
    assert obj({"val_score": 0.9, "train_time_s": 5})["objective"] == pytest.approx(0.95)


def test_weighted_objective_trades_accuracy_for_time_by_the_weight():
    slow_accurate = {"val_score": 0.92, "train_time_s": 40}
    fast_rough = {"val_score": 0.88, "train_time_s": 10}
    # 2 doublings of time cost 2 * w: with w=0.05 the fast one wins, with w=0.01 the accurate one.
    strong, weak = WeightedObjective(time_weight=0.05), WeightedObjective(time_weight=0.01)
    assert strong(fast_rough)["objective"] > strong(slow_accurate)["objective"]
    assert weak(slow_accurate)["objective"] > weak(fast_rough)["objective"]
    zero = WeightedObjective(time_weight=0)
    assert zero(slow_accurate)["objective"] == pytest.approx(0.92)


def test_time_to_target_counts_the_first_epoch_that_reaches_it():
    obj = TimeToTargetObjective(target=0.8)
    state: dict = {}
    reports = [(0.5, 2.0), (0.82, 4.0), (0.79, 6.0), (0.9, 8.0)]
    values = [obj({"val_score": a, "train_time_s": t}, state) for a, t in reports]
    assert math.isnan(values[0]["time_to_target_s"])
    assert values[-1]["time_to_target_s"] == 4.0
    assert values[-1]["objective"] == -4.0


def test_time_to_target_ranks_misses_below_every_hit_and_by_accuracy():
    obj = TimeToTargetObjective(target=0.8)
    slow_hit = obj({"val_score": 0.81, "train_time_s": 5000.0}, {})["objective"]
    good_miss = obj({"val_score": 0.79, "train_time_s": 1.0}, {})["objective"]
    bad_miss = obj({"val_score": 0.30, "train_time_s": 1.0}, {})["objective"]
    assert slow_hit > good_miss > bad_miss


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "weighted", "time_weight": -0.1}, "time_weight must be >= 0"),
        ({"name": "time_to_target"}, "needs a target"),
        ({"name": "time_to_target", "target": 1.5}, "target accuracy"),
        ({"name": "fastest"}, "unknown objective"),
    ],
)
def test_bad_objective_options(kwargs, message):
    name = kwargs.pop("name")
    with pytest.raises(ValueError, match=message):
        make_objective(name, **kwargs)


def test_intermediate_results_are_compared_at_projected_full_run_time():
    obj = WeightedObjective(time_weight=0.05, reference_time_s=10)
    halfway = obj({"val_score": 0.8, "train_time_s": 5, "epoch": 1, "epochs_planned": 2})
    finished = obj({"val_score": 0.8, "train_time_s": 10, "epoch": 2, "epochs_planned": 2,
                    "done": True})
    assert halfway["objective"] == pytest.approx(finished["objective"])
    # A trial that stopped itself early (early stopping) really was that fast.
    stopped = obj({"val_score": 0.8, "train_time_s": 5, "epoch": 1, "epochs_planned": 2,
                   "done": True})
    assert stopped["objective"] > finished["objective"]


@pytest.mark.parametrize("status", ["diverged", "infeasible"])
def test_failed_trials_score_below_everything(status):
    from orchestrator.objective import FAILED_SCORE, ParetoObjective

    bad = {"val_score": 0.9, "train_time_s": 0.1, "status": status}
    for obj in (WeightedObjective(), TimeToTargetObjective(target=0.5), ParetoObjective()):
        assert obj(bad, {})["objective"] == FAILED_SCORE
    assert ParetoObjective()(bad)["val_score"] == 0.0


def test_pareto_mask():
    from orchestrator.pareto import pareto_mask

    scores = [0.9, 0.8, 0.85, 0.7, 0.9]
    times = [10.0, 5.0, 12.0, 6.0, 10.0]
    # 0.85@12 is beaten by 0.9@10; 0.7@6 by 0.8@5; equal points do not dominate each other.
    assert pareto_mask(scores, times) == [True, True, False, False, True]
