"""What a real Optuna study is told through `TruthfulOptunaSearch` (no Ray cluster needed: the
searcher is driven the way Tune drives it). Run: python -m pytest -q tests/orchestrator/test_searcher.py"""

from __future__ import annotations

import optuna
import pytest
from optuna.samplers import NSGAIISampler, TPESampler
from optuna.trial import TrialState
from ray import tune

from orchestrator.tune.searcher import TruthfulOptunaSearch
from trainables.status import OnResume, TrialStatus

SPACE = {"width": tune.choice([0.25, 0.5, 1.0, 2.0]), "lr": tune.loguniform(1e-3, 1e-1)}


def _searcher(pareto: bool = False) -> TruthfulOptunaSearch:
    if pareto:
        return TruthfulOptunaSearch(space=SPACE, metric=["val_score", "train_time_s"],
                                    mode=["max", "min"], sampler=NSGAIISampler(seed=0), seed=0)
    return TruthfulOptunaSearch(space=SPACE, metric="objective", mode="max",
                                sampler=TPESampler(seed=0), seed=0)


def _run(searcher, tid: str, final: dict | None, error: bool = False, partial: dict | None = None):
    searcher.suggest(tid)
    if partial is not None:
        searcher.on_trial_result(tid, {**partial, "training_iteration": 1})
    searcher.on_trial_complete(tid, final, error=error)


def test_each_outcome_is_told_in_optunas_terms():
    s = _searcher()
    _run(s, "done", {"objective": 0.7, "status": "completed", "done": True})
    _run(s, "asha", {"objective": 0.9, "status": "running", "done": False},
         partial={"objective": 0.9, "status": "running"})
    _run(s, "oom", {"objective": -1e9, "status": "infeasible", "done": True})
    _run(s, "nan", {"objective": -1e9, "status": "diverged", "done": True})
    _run(s, "bug", {"objective": -1e9, "status": "failed", "done": True})
    _run(s, "crash", None, error=True)
    trials = s._ot_study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED,
                                         TrialState.COMPLETE, TrialState.COMPLETE,
                                         TrialState.FAIL, TrialState.FAIL]
    assert trials[0].value == 0.7 and trials[0].constraints == {"runs": 0.0}
    # Infeasible and diverged: the worst value and a violated constraint.
    assert trials[2].value == -1e9 and trials[2].constraints == {"runs": 1.0}
    assert trials[3].constraints == {"runs": 1.0}
    # The scheduler-stopped trial is not a finished 0.9: the best is the finished 0.7.
    assert s._ot_study.best_value == 0.7


def test_no_failed_trial_is_on_the_pareto_front():
    s = _searcher(pareto=True)
    _run(s, "slow", {"val_score": 0.8, "train_time_s": 20.0, "status": "completed"})
    _run(s, "fast", {"val_score": 0.6, "train_time_s": 5.0, "status": "completed"})
    # What the objective reports for an OOM trial: 0 accuracy at 0 s, which would dominate on
    # time. Told as infeasible it never sits on the front.
    _run(s, "oom", {"val_score": 0.0, "train_time_s": 0.0, "status": "infeasible"})
    _run(s, "nan", {"val_score": 0.0, "train_time_s": 0.1, "status": "diverged"})
    front = {tuple(t.values) for t in s._ot_study.best_trials}
    assert front == {(0.8, 20.0), (0.6, 5.0)}


def test_tpe_steers_away_from_an_infeasible_region():
    """Widths >= 1.0 always run out of memory. Over 15 trials (3 random start-up ones, as
    `make_searcher` sets for 15) TPE proposes them clearly less often than the 7.5 that random
    sampling would (4 on average over seeds 0-9)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = {"width": SPACE["width"], "batch_size": tune.choice([16, 32])}
    s = TruthfulOptunaSearch(space=space, metric="objective", mode="max",
                             sampler=TPESampler(seed=0, n_startup_trials=3), seed=0)
    in_region = 0
    for i in range(15):
        cfg = s.suggest(str(i))
        if cfg["width"] >= 1.0:
            in_region += 1
            s.on_trial_complete(str(i), {"objective": -1e9, "status": "infeasible"})
        else:
            s.on_trial_complete(str(i), {"objective": 0.5 + 0.1 * cfg["width"],
                                         "status": "completed"})
    assert in_region <= 5, in_region


@pytest.mark.parametrize("status", [s for s in TrialStatus
                                    if s.traits.on_resume == OnResume.KEEP])
def test_a_status_tells_optuna_the_same_live_and_on_resume(status):
    """The live searcher and the resumed study read one status table: every status a resume
    keeps is told the same state, value and constraint both times (issue 20)."""
    from orchestrator.tune.history import seeded_storage
    from orchestrator.records import TrialRecord

    space = {"width": tune.choice([0.25, 0.5])}
    metrics = {"objective": 0.7, "status": str(status)}
    live = TruthfulOptunaSearch(space=space, metric="objective", mode="max",
                                sampler=TPESampler(seed=0), seed=0)
    knobs = live.suggest("t")
    live.on_trial_complete("t", metrics)
    record = TrialRecord("t", 1, knobs, 0.0, 1.0, status, metrics={"objective": 0.7})
    resumed = optuna.load_study(study_name="s", storage=seeded_storage(
        [record], space, "objective", "max", "s"))

    def told(trial):
        return trial.state, trial.values, trial.system_attrs.get("constraints:runs")

    assert told(live._ot_study.trials[0]) == told(resumed.trials[0])
    assert told(resumed.trials[0])[0].name == status.traits.optuna_state


def test_a_trial_the_stopper_ended_is_told_as_the_stopper_decided():
    """A trial the target stopper ended reports `running` last; Optuna hears its decision
    (reached the target: COMPLETE with its value), as the trial book and a resume do."""
    from orchestrator.evidence import Evidence

    evidence = Evidence()
    evidence.stopped("fast", TrialStatus.EARLY_STOPPED, "reached the target")
    evidence.stopped("slow", TrialStatus.PRUNED, "slower than the baseline")
    s = TruthfulOptunaSearch(space=SPACE, metric="objective", mode="max",
                             sampler=TPESampler(seed=0), seed=0, evidence=evidence)
    _run(s, "fast", {"objective": -3.0, "status": "running"})
    _run(s, "slow", {"objective": -1e6, "status": "running"})
    fast, slow = s._ot_study.trials
    assert (fast.state, fast.value) == (TrialState.COMPLETE, -3.0)
    assert slow.state == TrialState.PRUNED


@pytest.mark.parametrize("pareto", [True, False], ids=["nsga2", "tpe"])
def test_the_searcher_pickles_as_tune_stores_it_and_goes_on_proposing(pareto, tmp_path):
    """Tune pickles the searcher into tuner.pkl before the first trial and into every searcher
    checkpoint; Optuna 5.1's NSGA-II holds a lock that pickle refuses."""
    import ray.cloudpickle

    from orchestrator.tune.samplers import sampler

    metric, mode = (["val_score", "train_time_s"], ["max", "min"]) if pareto else ("objective",
                                                                                     "max")
    s = TruthfulOptunaSearch(space=SPACE, metric=metric, mode=mode,
                             sampler=sampler(pareto, seed=0, num_trials=8))
    final = {"val_score": 0.5, "train_time_s": 3.0, "objective": 0.5, "status": "completed",
             "done": True}
    for i in range(5):
        _run(s, f"t{i}", final)
    copy = ray.cloudpickle.loads(ray.cloudpickle.dumps(s))
    s.save(str(tmp_path / "searcher.pkl"))
    restored = TruthfulOptunaSearch(space=SPACE, metric=metric, mode=mode,
                                    sampler=sampler(pareto, seed=0, num_trials=8))
    restored.restore(str(tmp_path / "searcher.pkl"))
    for searcher in (copy, restored):
        assert len(searcher._ot_study.trials) == 5
        _run(searcher, "next", final)  # the unpickled sampler's own lock guards its cache again
        assert set(searcher._ot_study.trials[-1].params) == set(SPACE)
