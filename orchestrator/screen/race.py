"""The race: each contender is decided from the start of its run, not trained to the target.

A confirmation trained to the target costs its whole time to it, and the screen's search paid
a few of them whatever the job's length: 2-3 baseline runs (docs/benchmarks.md). In the race a
contender trains until its learning curve tells its time to the target well enough, and stops:

* **Compared at equal progress.** A contender's schedule spans P epochs as the baseline's
  spans N (orchestrator/screen/predict.py plans P from the gradient noise scale), so at the
  same fraction of its schedule it has taken the same share of its learning-rate schedule.
  There, its error (1 - score) is compared with the baseline's best error so far: their ratio k
  says how much better or worse it learns.
* **Extrapolated with an uncertainty.** k is the geometric mean of the ratios at its validated
  points, with a standard error from their spread (never below `NOISE`, a validation's own
  epoch-to-epoch noise: unet3d's Dice moved 1-3 points an epoch). The contender reaches the
  target S - tolerance where the baseline's error curve, scaled by k, falls to 1 - target:
  its progress p*, its epoch p* x P, and its time, that epoch at its own measured pace. The
  bounds are those of k at `Z` standard errors; a k too large never gets there (no bound).
* **Stopped when it cannot win, or once it is told.** A contender whose optimistic time to the
  target is slower than another's pessimistic one (or a time measured) cannot win: cut. One
  whose bounds lie within `TOLD` of each other, or that reached `DECIDE_AT` of its schedule, is
  decided: stopped with its expected time (status `decided`). Nothing is judged before
  `RUNG` of its schedule and two validated points.

The fastest expected is the answer, and only it trains to the target: the measure stage trains
it as it is handed over (orchestrator/measure.py), for the epochs its pessimistic bound needs.
How often the race stopped a contender that would have won (a false cut) is measured by the
benchmarks, which train what it cut to the end (benchmarks/headline.py, benchmarks/race_
calibration.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from orchestrator.evidence import Evidence
from trainables.loop.state import validated
from trainables.status import TrialStatus

# Nothing is judged before this fraction of a contender's schedule: earlier, the lr warms up and
# scores move by tens of points epoch to epoch.
RUNG = 0.2
# A contender is decided by this fraction of its schedule at the latest.
DECIDE_AT = 0.4
# Bounds this close (pessimistic / optimistic time) tell the time well enough to stop.
TOLD = 1.5
# Standard errors either side of the expected ratio: the bounds.
Z = 2.0
# The least uncertainty of a log error ratio: one validation's epoch-to-epoch noise.
NOISE = 0.05
# Validated points a contender needs before it is judged.
POINTS = 2


@dataclass(frozen=True)
class Expected:
    """A contender's time to the target, as its curve tells it."""

    low_s: float
    mid_s: float
    high_s: float
    """inf: at its pessimistic bound it never reaches the target within its schedule."""
    epoch: int
    """The epoch its pessimistic bound reaches the target at (its plan where it never does)."""
    ratio: float
    """Its error over the baseline's at equal progress (geometric mean: < 1 learns faster)."""


class BaselineCurve:
    """The baseline's best error so far against its progress (epoch / N): a monotone envelope,
    so one bad validation does not lower the bar."""

    def __init__(self, curve: list[list[float]]):
        n = max(int(e) for e, _, _ in curve)
        best, points = 0.0, []
        for epoch, score, _ in curve:
            best = max(best, float(score))
            points.append((int(epoch) / n, max(1.0 - best, 1e-6)))
        self.points = points

    def error_at(self, progress: float) -> float:
        """Linearly interpolated; held flat before its first point and after its last."""
        previous = self.points[0]
        for p, e in self.points:
            if p >= progress:
                p0, e0 = previous
                return e0 + (e - e0) * (progress - p0) / (p - p0) if p > p0 else e
            previous = (p, e)
        return self.points[-1][1]

    def progress_at(self, error: float) -> float | None:
        """The first progress at which the envelope's error is at or below `error`."""
        previous = (0.0, self.points[0][1])
        for p, e in self.points:
            if e <= error:
                p0, e0 = previous
                return p0 + (p - p0) * (e0 - error) / (e0 - e) if e0 > e else p
            previous = (p, e)
        return None


def expect(baseline: BaselineCurve, points: list[tuple[float, float]], target: float,
           planned: int, pace: tuple[int, float, float]) -> Expected | None:
    """A contender's expected time to the target from its validated `points` ((progress,
    score)), its schedule of `planned` epochs and its `pace` (epoch, training time at it, seconds
    an epoch after its first); None before `POINTS` points."""
    if len(points) < POINTS:
        return None
    logs = [math.log(max(1.0 - s, 1e-6) / baseline.error_at(p)) for p, s in points]
    mean = statistics.fmean(logs)
    spread = statistics.stdev(logs) if len(logs) > 1 else NOISE
    se = max(spread, NOISE) / math.sqrt(len(logs)) * math.sqrt(2)  # few points: no better
    epoch_now, time_now, per_epoch = pace

    def time_for(log_ratio: float) -> tuple[float, int]:
        progress = baseline.progress_at((1.0 - target) / math.exp(log_ratio))
        if progress is None or progress > 1.0:
            return math.inf, planned
        epoch = max(1, math.ceil(progress * planned - 1e-9))
        return time_now + (epoch - epoch_now) * per_epoch, epoch

    low, _ = time_for(mean - Z * se)
    mid, _ = time_for(mean)
    high, epoch = time_for(mean + Z * se)
    return Expected(low, mid, high, epoch, math.exp(mean))


class RaceRule:
    """The stopper's race rule for one search (orchestrator/stopper.py calls it on every
    report of a running contender); what it expects goes to the evidence."""

    def __init__(self, baseline: dict, target: float, evidence: Evidence):
        self.curve = BaselineCurve(baseline["curve"])
        self.target, self.evidence = target, evidence
        self._points: dict[str, list[tuple[float, float]]] = {}
        self._first: dict[str, tuple[int, float]] = {}

    def __call__(self, trial_id: str, result: dict) -> tuple[TrialStatus, str] | None:
        epoch = int(result.get("epoch") or 0)
        planned = int(result.get("epochs_planned") or 1)
        spent = float(result.get("train_time_s", 0.0))
        first = self._first.setdefault(trial_id, (epoch, spent))
        points = self._points.setdefault(trial_id, [])
        if validated(result) and result.get("val_score") is not None:
            points.append((epoch / planned, float(result["val_score"])))
        if epoch / planned < RUNG or epoch <= first[0]:
            return None
        pace = (epoch, spent, (spent - first[1]) / (epoch - first[0]))
        found = expect(self.curve, points, self.target, planned, pace)
        if found is None:
            return None
        self.evidence.expected(trial_id, found.low_s, found.mid_s, found.high_s, found.epoch)
        bar = self.evidence.best_bound(besides=trial_id)
        if bar is not None and found.low_s > bar:
            return (TrialStatus.PRUNED,
                    f"extrapolated slower: at best {found.low_s:.1f} s to the target (its "
                    f"error {found.ratio:.2f}x the baseline's at equal progress), another "
                    f"reaches it by {bar:.1f} s")
        if found.high_s <= TOLD * found.low_s or epoch / planned >= DECIDE_AT:
            high = "never" if math.isinf(found.high_s) else f"{found.high_s:.1f} s"
            return (TrialStatus.DECIDED,
                    f"decided at {epoch / planned:.0%} of its schedule: expected at the target "
                    f"in {found.mid_s:.1f} s ({found.low_s:.1f} s to {high}; its error "
                    f"{found.ratio:.2f}x the baseline's at equal progress)")
        return None
