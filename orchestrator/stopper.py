"""When a time-to-target trial has its answer: stop it then, not after its planned epochs.

A time-to-target objective (`time_to_target`, `match_baseline`) is fixed at the first epoch that
reaches the target: later epochs cannot change it, so they would only spend the search's budget.
Under `match_baseline` a trial whose training time passes the baseline's time to the same score
without reaching it can no longer be faster than the baseline: it is cut there. Nor can a trial
whose training time passes the fastest time to the target another trial reached: it is cut too. Trials can then
be planned as long as the baseline's run (so that they can reach its score at all) at the cost
of only the epochs that decide them. A trial whose twin (the same run at another precision or
speed switches, orchestrator/evidence.py) is decided is cut as soon as its own pace, measured over
its epochs after the first, shows it cannot reach the target before the fastest time.
"""

from __future__ import annotations

import math

from ray.tune import Stopper

from orchestrator.curves import first_at
from orchestrator.evidence import Evidence
from trainables.loop.state import validated
from trainables.status import TrialStatus


# A trial more than LAG below the baseline's score at the same point of its schedule, from
# LAG_FROM of it on, is cut. Validation scores of one run move by a few points epoch to epoch,
# and by up to ten while the lr is near its peak (onecycle: the first 30% of the schedule), so
# nothing is judged before half of it (measured: a configuration 0.12 behind at 35% of its
# schedule reached the target on time).
LAG = 0.05
LAG_FROM = 0.5
# A confirmation skips validating an epoch whose training loss is above GATE_MARGIN times the
# baseline's at the epoch it first reached the target, until LAG_FROM of its schedule (where the
# behind rule needs its scores). On unet3d every confirmation that reached the target did so at
# a loss within 1.15x of the baseline's (docs/benchmarks.md); the margin leaves room for a model
# or batch whose loss means a little less (the classifier's is not measured yet).
GATE_MARGIN = 2.0


def allowed_lag(point: float, tolerance: float) -> float:
    """LAG at LAG_FROM of the schedule, shrinking to the objective's tolerance at its end: a
    trial must end within the tolerance of the baseline's score, so the lag it may have narrows
    as its epochs run out."""
    left = max(0.0, 1.0 - point) / (1.0 - LAG_FROM)
    return tolerance + (LAG - tolerance) * min(1.0, left)


def _at(curve: list[tuple[float, float]], point: float) -> float:
    """The curve's score at `point` (a fraction of its schedule), linearly interpolated."""
    previous = (0.0, curve[0][1])
    for x, y in curve:
        if x >= point:
            x0, y0 = previous
            return y0 + (y - y0) * (point - x0) / (x - x0) if x > x0 else y
        previous = (x, y)
    return curve[-1][1]


def validation_gate(baseline: dict, target: float) -> dict:
    """The trial settings (trainables/config.py) that let a confirmation skip the validations
    that cannot decide it: none before its training loss comes near the baseline's where the
    baseline first reached `target`. Empty (validate every epoch) for a baseline that never
    reached it, or whose losses were not recorded."""
    reached = first_at(baseline.get("curve") or [], target)
    losses = dict((int(e), v) for e, v in baseline.get("losses") or [])
    loss = losses.get(reached.epoch) if reached else None
    if not _finite(loss) or loss <= 0:
        return {}
    return {"val_skip_above_loss": GATE_MARGIN * loss, "val_skip_until": LAG_FROM}


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


class TargetStopper(Stopper):
    """Stops a trial once it reached the objective's target (`early_stopped`), or, with a
    baseline, once its training time passes the baseline's without reaching it (`pruned`).
    What it decides goes to the search's `Evidence` (reached, missed, stopped, twins), which
    the trial book and the searcher read."""

    def __init__(self, objective, evidence: Evidence | None = None,
                 curve: list[list[float]] | None = None, rules: tuple = ()):
        """curve: the baseline's learning curve ([epoch, score, time] of its `len(curve)`
        epochs), to cut a trial that falls behind it (`LAG`), or None. rules: more decisions
        of a strategy's own, each (trial id, result) -> (status, reason) or None, asked after
        the measured ones (the screen's race: orchestrator/screen/race.py)."""
        self.objective, self.rules = objective, tuple(rules)
        self.evidence = evidence if evidence is not None else Evidence()
        # Its best score so far at each point of its schedule (a monotone envelope: one bad
        # validation must not lower the bar).
        self.curve = [(e / len(curve), max(s for _, s, _ in curve[:i + 1]))
                      for i, (e, _, _) in enumerate(curve)] if curve else []
        self._best_score: dict[str, float] = {}
        self._first: dict[str, tuple[int, float]] = {}  # trial -> (epoch, training time) first seen

    def __call__(self, trial_id: str, result: dict) -> bool:
        stop = self._decide(trial_id, result)
        running = result.get("status", TrialStatus.RUNNING) == TrialStatus.RUNNING
        if (stop or not running) and isinstance(result.get("config"), dict) \
                and result.get("epoch"):
            # Decided: what it reached, or did not by this epoch, tells its twins.
            self.evidence.learn_twin(result["config"], int(result["epoch"]),
                                     _finite(result.get("time_to_target_s")))
        return stop

    def _stop(self, trial_id: str, status: TrialStatus, reason: str) -> bool:
        self.evidence.stopped(trial_id, status, reason)
        return True

    def _decide(self, trial_id: str, result: dict) -> bool:
        target = getattr(self.objective, "target", None)
        reached = result.get("time_to_target_s")
        config = result.get("config") if isinstance(result.get("config"), dict) else None
        if _finite(reached):  # (also at its last epoch, where it ends by itself)
            self.evidence.reached(trial_id, float(reached), config)
        if result.get("status", TrialStatus.RUNNING) != TrialStatus.RUNNING:
            last = result.get("done") or result.get("epoch") == result.get("epochs_planned")
            if last and not _finite(reached):  # all its epochs, and still below the target
                best = max(self._best_score.get(trial_id, -math.inf),
                           float(result.get("val_score", -math.inf)))
                self.evidence.missed(trial_id, target - best if _finite(target) and
                                     _finite(best) else math.inf, config)
            return False  # it ends by itself (done, diverged, infeasible, ...)
        if _finite(reached):
            return self._stop(trial_id, TrialStatus.EARLY_STOPPED,
                              f"reached the target {target:.4f} at epoch {result.get('epoch')}")
        spent = float(result.get("train_time_s", 0.0))
        baseline_s = getattr(self.objective, "baseline_s", None)
        if self.objective.needs_baseline and _finite(baseline_s) and spent >= baseline_s:
            return self._stop(
                trial_id, TrialStatus.PRUNED,
                f"slower than the baseline: {spent:.1f}s of training, the baseline took "
                f"{baseline_s:.1f}s to its score, target {target:.4f} not reached")
        best_s = self.evidence.best_s
        if best_s is not None and spent >= best_s:
            return self._stop(
                trial_id, TrialStatus.PRUNED,
                f"slower than the fastest trial: {spent:.1f}s of training, another reached the "
                f"target {target:.4f} in {best_s:.1f}s")
        if self._twin_slower(trial_id, result, spent) or self._behind(trial_id, result, config):
            return True
        for rule in self.rules:
            decided = rule(trial_id, result)
            if decided is not None:
                return self._stop(trial_id, *decided)
        return False

    def _twin_slower(self, trial_id: str, result: dict, spent: float) -> bool:
        """Cut a trial whose decided twin says it reaches the target no sooner than epoch E,
        when E epochs at its own pace (its epochs after the first: that one also pays the
        warm-up and the shard's first read) take longer than the fastest time to the target
        (or, under match_baseline, than the baseline's)."""
        epoch = int(result.get("epoch") or 0)
        first = self._first.setdefault(trial_id, (epoch, spent))
        twin = self.evidence.twin_epoch(result.get("config") or {})
        bars = [b for b in (self.evidence.best_s, getattr(self.objective, "baseline_s", None)
                            if self.objective.needs_baseline else None) if _finite(b)]
        if twin is None or not bars or epoch <= first[0]:
            return False
        pace = (spent - first[1]) / (epoch - first[0])
        earliest, why = twin
        projected = spent + max(0, earliest - epoch) * pace
        if projected <= min(bars):
            return False
        return self._stop(
            trial_id, TrialStatus.PRUNED,
            f"projected slower than the fastest: {why}, so this run reaches it at epoch "
            f"{earliest} at the earliest; at {pace:.2f}s an epoch that is {projected:.1f}s of "
            f"training, against {min(bars):.1f}s")

    def _behind(self, trial_id: str, result: dict, config: dict | None) -> bool:
        """Cut a trial whose best score, at a point of its own schedule (epoch / planned epochs,
        from LAG_FROM on: after the warm-up), is further below the baseline's best score at the
        same point of its schedule than `allowed_lag` lets it be: it learns less than the
        baseline did, and its remaining epochs would be spent on a configuration that cannot
        reach the baseline's accuracy."""
        score = result.get("val_score")
        if not self.curve or not _finite(score) or not validated(result):
            return False
        best = self._best_score[trial_id] = max(self._best_score.get(trial_id, -math.inf), score)
        planned = result.get("epochs_planned") or result.get("epoch")
        point = float(result.get("epoch", 0)) / float(planned or 1)
        if point < LAG_FROM or point >= 1.0:
            return False
        expected = _at(self.curve, point)
        if best >= expected - allowed_lag(point, getattr(self.objective, "tolerance", 0.0)):
            return False
        self.evidence.missed(trial_id, expected - best, config)
        return self._stop(
            trial_id, TrialStatus.PRUNED,
            f"behind the baseline's learning curve: best {best:.4f} at {point:.0%} of its "
            f"schedule, the baseline had {expected:.4f} there")

    def stop_all(self) -> bool:
        return False


def target_stopper(objective, evidence: Evidence | None = None, baseline: dict | None = None
                   ) -> TargetStopper | None:
    """The stopper for `objective`, or None when its value can change until the last epoch.
    Under match_baseline it also cuts a trial that falls behind the baseline's learning curve,
    whichever strategy runs it: a reference search is cut as the screen's confirmations are."""
    if not objective.stops_at_target:
        return None
    curve = (baseline or {}).get("curve") if objective.needs_baseline else None
    return TargetStopper(objective, evidence, curve=curve)
