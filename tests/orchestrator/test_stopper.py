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
    status, reason = stopper.evidence.decision("t1")
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
    status, reason = stopper.evidence.decision("slow")
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
    assert stopper.evidence.decisions() == {}


def _epochs(objective, stopper, trial, config, pace, epochs, first=None, score=0.6):
    """Report `epochs` of `trial` (its first epoch `first` s, then `pace` s each) until the
    stopper cuts it; the epoch it was cut at, or None."""
    state, spent = {}, 0.0
    for epoch in range(1, epochs + 1):
        spent += first if epoch == 1 and first is not None else pace
        metrics = objective({"val_score": score(epoch) if callable(score) else score,
                             "train_time_s": spent, "epoch": epoch, "epochs_planned": 21,
                             "status": "running", "config": config}, state)
        if stopper(trial, metrics):
            return epoch
    return None


def test_a_twin_of_a_decided_run_is_cut_once_its_pace_shows_it_cannot_win():
    objective = make_objective("time_to_target", target=0.9)
    stopper = TargetStopper(objective)
    bf16 = {"precision": "bf16-mixed", "batch_size": 4, "width": 1.0, "epochs": 21}
    # bf16 reaches the target at epoch 12, 0.75 s an epoch: 9 s.
    assert _epochs(objective, stopper, "bf16", bf16, 0.75, 21,
                   score=lambda e: 0.95 if e >= 12 else 0.6) == 12
    assert stopper.evidence.best_s == 9.0
    # Its fp32 twin runs 1.1 s an epoch (a slower first one): reaching at epoch 11 at the
    # earliest (one epoch of margin) is 11.0+ s > 9 s, known after its second epoch.
    fp32 = {**bf16, "precision": "fp32", "channels_last": True}
    assert _epochs(objective, stopper, "fp32", fp32, 1.1, 21, first=2.0) == 2
    status, reason = stopper.evidence.decision("fp32")
    assert status == "pruned" and "projected slower" in reason
    assert "a twin reached the target at epoch 12" in reason and "epoch 11" in reason
    # A twin at a faster pace may still win: not cut (0.7 s x 11 = 7.7 s < 9 s) until it is
    # slower than the fastest in fact.
    fast = {**bf16, "precision": "fp32"}
    stopper = TargetStopper(objective)  # forget fp32's own decision
    stopper.evidence.reached("bf16", 9.0, bf16)
    stopper.evidence.learn_twin(bf16, 12, True)
    assert _epochs(objective, stopper, "fast", fast, 0.7, 21) == 13
    assert "slower than the fastest trial" in stopper.evidence.decision("fast")[1]
    # Not a twin (another batch learns otherwise): its pace alone decides nothing.
    other = {**bf16, "batch_size": 8, "precision": "fp32"}
    assert _epochs(objective, stopper, "other", other, 1.1, 10) == 9  # 9.9 s > 9 s
    assert "slower than the fastest trial" in stopper.evidence.decision("other")[1]


def test_a_twin_that_had_not_reached_the_target_bounds_the_other():
    objective = make_objective("time_to_target", target=0.9)
    stopper = TargetStopper(objective)
    stopper.evidence.earlier_reached({"precision": "bf16-mixed", "width": 2.0}, 7.0)
    run = {"precision": "fp32", "batch_size": 4, "width": 0.5, "epochs": 21}
    assert _epochs(objective, stopper, "a", run, 0.8, 21) == 9  # 7.2 s: slower than 7 s
    # Its bf16 twin: not before epoch 9 (had not by 9, one epoch of margin), 0.78 s an epoch.
    assert _epochs(objective, stopper, "b", {**run, "precision": "bf16-mixed"}, 0.78, 21) == 2
    assert "had not reached the target by epoch 9" in stopper.evidence.decision("b")[1]
    # Without a time to beat, a twin's epochs decide nothing.
    fresh = TargetStopper(objective)
    fresh.evidence.learn_twin(run, 9, False)
    assert _epochs(objective, fresh, "c", {**run, "precision": "bf16-mixed"}, 5.0, 3) is None
