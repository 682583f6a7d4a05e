"""What Optuna is told about each trial: the truth, in Optuna's own terms.

Ray's `OptunaSearch` tells every trial that has a value as COMPLETE: a trial stopped by ASHA or
the time budget with its partial value, and a trial that ran out of memory or diverged with the
placeholder its objective reported (for NSGA-II, zero accuracy at the fastest possible time: a
point on the front). `TruthfulOptunaSearch` tells:

* finished trials (completed, early-stopped): COMPLETE with their values, feasible;
* trials stopped by the scheduler or the budget: PRUNED (Optuna keeps their intermediate
  values; they never count as finished);
* infeasible and diverged trials (properties of the configuration): COMPLETE with the worst
  values and a violated constraint (`Trial.set_constraint`, Optuna 5), so TPE and NSGA-II steer
  away from the region and the study's front never holds them;
* failed trials (an error, a lost worker after its retries): FAIL.
"""

from __future__ import annotations

import logging

from ray.tune.search.optuna import OptunaSearch

from trainables.status import CONFIG_FAILURES, RANKABLE, TrialStatus

logger = logging.getLogger(__name__)

# The constraint's name in the study: > 0 means the configuration could not run.
CONSTRAINT = "runs"
# Worse than any real trial's value, in the direction of each objective.
WORST = {"max": -1e9, "min": 1e9}


class TruthfulOptunaSearch(OptunaSearch):
    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        from optuna.trial import TrialState

        if trial_id in self._completed_trials or trial_id not in self._ot_trials:
            return super().on_trial_complete(trial_id, result, error)
        ot_trial = self._ot_trials[trial_id]
        metrics = self.metric if isinstance(self.metric, list) else [self.metric]
        modes = self.mode if isinstance(self.mode, list) else [self.mode]
        status = (result or {}).get("status")
        values = None
        if error or not result or status == TrialStatus.FAILED:
            state = TrialState.FAIL
        elif status in CONFIG_FAILURES:
            state = TrialState.COMPLETE
            values = [WORST[m] for m in modes]
            ot_trial.set_constraint(CONSTRAINT, 1.0)
        elif status in RANKABLE:
            state = TrialState.COMPLETE
            values = [result.get(k) for k in metrics]
            ot_trial.set_constraint(CONSTRAINT, 0.0)
            if any(v is None for v in values):
                state, values = TrialState.FAIL, None
        else:
            # Still 'running' when it ended: stopped by the scheduler or the time budget.
            state = TrialState.PRUNED
        if values is not None and not isinstance(self.metric, list):
            values = values[0]
        try:
            self._ot_study.tell(ot_trial, values, state=state)
        except Exception as exc:  # noqa: BLE001 - as OptunaSearch: a bad value must not end the search
            logger.warning("Optuna refused trial %s: %s", trial_id, exc)
        self._completed_trials.add(trial_id)
