"""What Optuna is told about each trial: the truth, in Optuna's own terms.

Ray's `OptunaSearch` tells every trial that has a value as COMPLETE: a trial stopped by ASHA or
the time budget with its partial value, and a trial that ran out of memory or diverged with the
placeholder its objective reported (for NSGA-II, zero accuracy at the fastest possible time: a
point on the front). `TruthfulOptunaSearch` tells each trial what its status's row of
`trainables.status.STATUS_TABLE` says, through `tell`, the one function that the resumed study
(orchestrator/tune/history.py) uses too:

* finished trials (completed, early-stopped): COMPLETE with their values, feasible;
* trials stopped by the scheduler or the budget, and repeats: PRUNED (Optuna keeps their
  intermediate values; they never count as finished);
* infeasible and diverged trials (properties of the configuration): COMPLETE with the worst
  values and a violated constraint (`Trial.set_constraint`, Optuna 5), so TPE and NSGA-II steer
  away from the region and the study's front never holds them;
* failed trials (an error, a lost worker after its retries): FAIL.

A trial that a stopper ended (orchestrator/stopper.py) reports `running` last; its status is the
stopper's decision (the search's `Evidence`), as the trial book records it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from orchestrator.evidence import Evidence
from trainables.status import TrialStatus, traits

logger = logging.getLogger(__name__)

# The constraint's name in the study: > 0 means the configuration could not run.
CONSTRAINT = "runs"
# Worse than any real trial's value, in the direction of each objective.
WORST = {"max": -1e9, "min": 1e9}


def tell(study, ot_trial, status: str, metrics: Mapping[str, Any] | None,
         metric: str | list[str], mode: str | list[str]) -> None:
    """Tell `study` how `ot_trial` ended, as `status`'s traits say. A trial the table says is
    never told (discarded) is left alone."""
    from optuna.trial import TrialState

    trait = traits(status)
    if trait.optuna_state is None:
        return
    names = metric if isinstance(metric, list) else [metric]
    modes = mode if isinstance(mode, list) else [mode]
    state, values = TrialState[trait.optuna_state], None
    if state == TrialState.COMPLETE and trait.feasible:
        values = [(metrics or {}).get(k) for k in names]
        if any(v is None for v in values):  # a finished trial without its values: an error
            state, values = TrialState.FAIL, None
    elif state == TrialState.COMPLETE:
        values = [WORST[m] for m in modes]
    if values is not None:
        ot_trial.set_constraint(CONSTRAINT, 0.0 if trait.feasible else 1.0)
        values = values if isinstance(metric, list) else values[0]
    study.tell(ot_trial, values, state=state)


class TruthfulOptunaSearch(OptunaSearch):
    """`evidence`: the search's record of decisions (orchestrator/evidence.py): a trial a
    stopper ended is told as its decision says."""

    def __init__(self, *args, evidence: Evidence | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._evidence = evidence

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        if trial_id in self._completed_trials or trial_id not in self._ot_trials:
            return super().on_trial_complete(trial_id, result, error)
        decided = self._evidence.decision(trial_id) if self._evidence is not None else None
        status = TrialStatus.FAILED if error or not result else \
            decided[0] if decided else result.get("status", TrialStatus.RUNNING)
        try:
            tell(self._ot_study, self._ot_trials[trial_id], status, result, self.metric,
                 self.mode)
        except Exception as exc:  # noqa: BLE001 - as OptunaSearch: a bad value must not end the search
            logger.warning("Optuna refused trial %s: %s", trial_id, exc)
        self._completed_trials.add(trial_id)
