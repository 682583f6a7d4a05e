"""When a time-to-target trial has its answer: stop it then, not after its planned epochs.

A time-to-target objective (`time_to_target`, `match_baseline`) is fixed at the first epoch that
reaches the target: later epochs cannot change it, so they would only spend the search's budget.
Under `match_baseline` a trial whose training time passes the baseline's time to the same score
without reaching it can no longer be faster than the baseline: it is cut there. Trials can then
be planned as long as the baseline's run (so that they can reach its score at all) at the cost
of only the epochs that decide them.
"""

from __future__ import annotations

import math

from ray.tune import Stopper

from trainables.status import TrialStatus


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


class TargetStopper(Stopper):
    """Stops a trial once it reached the objective's target (`early_stopped`), or, with a
    baseline, once its training time passes the baseline's without reaching it (`pruned`).
    `stopped` maps trial id -> (status, reason): the trial book and the searcher read it."""

    def __init__(self, objective):
        self.objective = objective
        self.stopped: dict[str, tuple[TrialStatus, str]] = {}

    def __call__(self, trial_id: str, result: dict) -> bool:
        if result.get("status", TrialStatus.RUNNING) != TrialStatus.RUNNING:
            return False  # it ends by itself (done, diverged, infeasible, ...)
        target = getattr(self.objective, "target", None)
        if _finite(result.get("time_to_target_s")):
            self.stopped[trial_id] = (
                TrialStatus.EARLY_STOPPED,
                f"reached the target {target:.4f} at epoch {result.get('epoch')}")
            return True
        baseline_s = getattr(self.objective, "baseline_s", None)
        if self.objective.needs_baseline and _finite(baseline_s) and \
                float(result.get("train_time_s", 0.0)) >= baseline_s:
            self.stopped[trial_id] = (
                TrialStatus.PRUNED,
                f"slower than the baseline: {result['train_time_s']:.1f}s of training, the "
                f"baseline's whole run took {baseline_s:.1f}s, score {target:.4f} not reached")
            return True
        return False

    def stop_all(self) -> bool:
        return False


def target_stopper(objective) -> TargetStopper | None:
    """The stopper for `objective`, or None when its value can change until the last epoch."""
    return TargetStopper(objective) if objective.stops_at_target else None
