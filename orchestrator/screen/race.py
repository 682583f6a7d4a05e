"""The race: each contender is decided from the start of its run, not trained to the target.

A confirmation trained to the target costs its whole time to it, and the screen's search paid
a few of them whatever the job's length: 2-3 baseline runs (docs/benchmarks.md). In the race a
contender trains until its learning curve tells its time to the target well enough, and stops:

* **Compared at equal progress.** A contender's schedule spans P epochs as the baseline's
  spans N (orchestrator/screen/predict.py plans P from the gradient noise scale), so at the
  same fraction of its schedule it has taken the same share of its learning-rate schedule.
  There, its best error so far (1 - score) is compared with the baseline's: their log
  ratio r says how much better or worse it learns.
* **The baseline's curve is the prior.** Before any evidence a contender learns as the
  baseline does (r = 0): it reaches the target where the baseline did, at the same fraction of
  its schedule, as the prediction said. Its points move r from there, the later ones more (an
  early score says little: the lr is still warming up, and a configuration 0.12 behind at 35%
  of its schedule reached the target on time), each no surer than the baseline's own curve is
  noisy (`BaselineCurve.noise`: a validation's epoch-to-epoch scatter, at most `SIGMA`, set by
  hand on unet3d, whose Dice moved 1-3 points an epoch), against a prior spread of `PRIOR`
  (how differently configurations of one space learn).
* **Extrapolated with an uncertainty.** The contender reaches the target S - tolerance where
  the baseline's error curve, scaled by exp(r), falls to 1 - target: its progress, its epoch,
  and its time at its own measured pace. At r's optimistic bound (`Z` standard errors) that is
  the soonest it can get there; at its pessimistic bound the latest, or its plan's end if it
  gets there at all (P is planned to learn as much as the baseline's N).
* **Stopped when it cannot win, cannot reach, or once it is told.** A contender whose soonest
  is later than another's latest (or than a time measured) cannot win: cut. One that even at
  its optimistic bound ends short of the target cannot reach it: cut, and taught to the
  confirmations as a miss. One whose bounds lie within `TOLD` of each other, or that reached
  `DECIDE_AT` of its schedule, is decided: stopped with its expected time (status `decided`;
  its plan's end where its expected ratio ends short but its optimistic one does not: a
  target within the tolerance of the baseline's final score is reached, if at all, as the lr
  anneals). Nothing is judged before `RUNG` of its schedule and `POINTS` validated points.
  Where the baseline reached the target less than halfway into its schedule (a long job), both
  fractions shrink with its way there (`horizon`): a contender is decided halfway to the
  target, not most of the way.
  One decided as less likely than not to reach the target (its expected ratio ends short) is
  measured only after likelier ones, bounds no other, rules out what learns no more than it
  (its model at a larger batch: orchestrator/screen/confirm.py) and sends the next
  confirmations to other models (orchestrator/evidence.py `LIKELY`).

The fastest expected is the answer, and only it trains to the target: the measure stage trains
it as it is handed over (orchestrator/measure.py), for the epochs its expected ratio needs (its
schedule planned for them; a longer one where that run ends short), going on from where the
race stopped it (`WARMUP_SHARE`: a contender's schedule shares its first epochs with the
answer's). Handing over its
pessimistic bound's epochs instead cost the answer half its speed: unet3d at 32 epochs reached
the target at epoch 25 of a 52-epoch plan, and trained all 52 (docs/benchmarks.md). The
fastest is the one fastest per chance of reaching: expected time / `reach` (a race calls a
contender within a point of the line by its plan's end "decided", and the classifier's that
were 0.65-0.8 standard errors short of it missed three times of three in the headline).
How often the race stopped a contender that would have won (a false cut) is measured by the
benchmarks, which train what it cut to the end (benchmarks/headline.py, benchmarks/race_
calibration.py); how this model calibrates against parametric fits to a contender's own points
(pow3, exp3: their intervals missed half the real times its held), by benchmarks/curve_models.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.curves import first_at, scatter
from orchestrator.evidence import LIKELY, Evidence
from orchestrator.screen.predict import epochs_to_target
from trainables.loop.schedules import DECAY_SHARE
from trainables.loop.state import validated
from trainables.loop.task import schedules_by_setting
from trainables.status import TrialStatus

# Nothing is judged before this fraction of a contender's schedule: earlier, the lr warms up and
# scores move by tens of points epoch to epoch.
RUNG = 0.2
# A contender is decided by this fraction of its schedule at the latest. What the race spends
# is this fraction of each contender's plan. Replayed on the runs the headline trained to their
# end (benchmarks/race_calibration.py --decide-at), deciding by 25% held the real time in its
# interval as often as by 40% (5 of 7), told it closer (median error 11% against 15%), and still
# ranked each run that missed below each that reached by its chance to reach (0.43-0.45 against
# 0.58-0.92): the points after a quarter of a schedule moved the answer no nearer the truth.
# Not a fifth: replayed on whole runs a fifth told as much, but in three 32-epoch unet3d searches
# deciding by 20% the baseline's own model read 1.07x and 1.48x its error in seeds 1 and 2 (at
# 25% the same seeds read it 1.09x and 1.25x), one search measured four misses in the order its
# reads gave, and the row cost 1.51 runs (1.07-2.74) against 1.22 (docs/benchmarks.md,
# 2026-12-08).
DECIDE_AT = 0.25
# Bounds this close (latest / soonest time) tell the time well enough to stop.
TOLD = 1.3
# Standard errors either side of the expected log ratio: the bounds.
Z = 2.0
# The most and the least uncertainty of one point's log error ratio (`BaselineCurve.noise`
# measures it between), and the prior spread of a contender's. SIGMA was set by hand on unet3d;
# held at it, the classifier's width-0.5 contenders, whose error at a quarter of their plan was
# already their final 1.14-1.24x the baseline's, kept a 0.28-0.36 chance to reach the target,
# and every one of them was measured and ended 2-5 points short (docs/benchmarks.md).
SIGMA = 0.25
NOISE_FLOOR = 0.02
# A contender's point is set against the baseline's (two validations' noise: sqrt(2) of one),
# and its curve bends otherwise than the baseline's (the rest). Replayed on the 106 contenders
# of the long-jobs searches whose configuration a measured run trained to its end
# (benchmarks/race_calibration.py --searches), 3 is the least that called none short that
# reached the target: at sqrt(2), 3 of the classifier's at 15 epochs and 4 of unet3d's at 32
# were. At 3 the classifier's 60-epoch baseline reads 0.08 and cuts 6 of its 15 that missed as
# short (width 0.5, the 0.3 chance above gone to 0.02-0.07); the others read SIGMA or near it.
NOISE_SCALE = 3.0
PRIOR = 0.4
# Validated points a contender needs before it is judged.
POINTS = 2
# At DECIDE_AT a contender whose expected log ratio lies this many standard errors or more
# above the largest that reaches the target is called short (its reach ~20% likely or less):
# a miss, which moves the next confirmations to other models (orchestrator/screen/confirm.py).
# Between, it is decided as reaching by its plan's end, and the measured run tells: with a
# tolerance of a point or less the baseline itself reaches the target near its end, and one
# that learns as the baseline does is a coin's toss from the line early on.
SHORT_AT = -0.84
# About this many points over a run the race reads: enough by `RUNG`, few on a long job (each
# point a weight in `log_ratio`, the spacing `NOISE_SCALE` and `SIGMA` were replayed at).
POINTS_PER_RUN = 16
# The fractions above hold where the baseline reached the target this far into its schedule or
# later (the runs they were replayed on: 63% and 87%), so that deciding by a quarter of a
# schedule is deciding at most halfway to the target. Where it reached it sooner, a contender at
# equal progress is expected there sooner too, and a quarter of its schedule is most of its way:
# at 128 unet3d epochs the baseline reached the target at 27% of its schedule, and the race
# trained the contenders it expected there to 0.5-0.94 of their expected time to it before
# deciding them; in one search of three, one reached it first (docs/benchmarks.md). There
# `RUNG`, `DECIDE_AT` and the cadence shrink in proportion (`horizon`): the race decides
# halfway to the target, as it does on shorter jobs.
HALFWAY = 0.5
# A contender trains warmup-stable-decay (trainables/loop/schedules.py) with onecycle's warm-up,
# over this share of its plan, counted in epochs. Through the warm-up, where the race reads it
# (it decides by `DECIDE_AT` of its plan), it learns as on onecycle; after it the peak holds
# until the last fifth of whatever length it runs. So the winner's measured run, E epochs on
# the same warm-up, is the contender continued: it goes on from the contender's checkpoint
# (trainables/loop/resume.py) and trains E - d epochs, not E. On unet3d at 32 epochs such a run
# ended higher than onecycle's at E on each of 3 seeds, and at the target on all 3 where
# onecycle's did on 1 (benchmarks/schedule_branch.py, docs/benchmarks.md).
# Where the race reads less than the whole schedule (`horizon`), the warm-up shrinks with it,
# so that it still ends where the race decides: a quarter of the plan is past the answer's
# whole run there. At 128 unet3d epochs the answers trained 34 epochs of plans of 128-157, on a
# 32-39-epoch warm-up: each was handed over on onecycle and trained from scratch, the 17
# epochs its contender had trained spent twice (docs/benchmarks.md).
WARMUP_SHARE = 0.25


def contender_schedule(config: dict, planned: int, task, share: float = 1.0) -> dict:
    """The schedule settings of a contender of `config` planned for `planned` epochs, where
    the race reads `share` of its schedule (`horizon`): warmup-stable-decay with onecycle's
    warm-up, over that share, where it would train onecycle, the built-in schedule (`task`'s
    lr follows the settings); else none, its own schedule as given."""
    if config.get("schedule", "onecycle") != "onecycle" or not schedules_by_setting(task):
        return {}
    return {"schedule": "wsd", "warmup_epochs": WARMUP_SHARE * share * planned}


def schedule_for(config: dict, base: dict) -> dict:
    """The schedule a contender's configuration is handed over with at its `epochs`: the
    race's, where its warm-up ends before its decay begins; else the one it replaced (the
    search's own, onecycle), which warms up over a quarter of any length: a 7-epoch run on a
    contender's 7.75-epoch warm-up would never reach its peak, and missed (0.79 where the
    whole plan reached 1.0)."""
    if config["warmup_epochs"] < (1 - DECAY_SHARE) * int(config["epochs"]):
        return {}
    return {"schedule": base.get("schedule", "onecycle"), "warmup_epochs": None}


def horizon(baseline: dict, target: float) -> float:
    """The share of a schedule the race's fractions apply to: 1 where the baseline reached
    `target` `HALFWAY` into its schedule or later (or never: the race then has no curve to
    follow anyway), its progress there over `HALFWAY` where sooner."""
    curve = baseline.get("curve") or []
    reached = first_at(curve, target) if curve else None
    if reached is None:
        return 1.0
    epochs = max(int(e) for e, _, _ in curve)
    return min(1.0, reached.epoch / epochs / HALFWAY)


def point_every(baseline: dict, target: float) -> int:
    """The race's point spacing, in epochs: a run of the baseline's length gives about
    POINTS_PER_RUN points over the share of it the race reads (`horizon`: the whole run where
    the baseline reached the target halfway or later)."""
    epochs = int(baseline.get("epochs") or len(baseline.get("curve") or []) or 1)
    return max(1, round(epochs * horizon(baseline, target) / POINTS_PER_RUN))


# The contenders' validation settings (trainables/config.py): every epoch from the first (no loss
# gate: the race reads the curve from `RUNG`), so that each point, every `point_every`-th epoch,
# holds the best score so far of every epoch, as the baseline's envelope does. Validated only
# every `point_every`-th epoch, a point held the best of those epochs alone: unet3d's Dice swings
# by tens of points between neighbouring epochs early on, and one contender (the baseline's own
# model, every 2nd epoch at 32 epochs: 0.787, 0.631, 0.818, 0.637) was cut at epoch 8 as short
# of a target it reached at epoch 20 trained to its end; its epoch 7, unseen, had 0.929. The
# extra validations cost 1-2 s a contender there (docs/benchmarks.md, 2026-12-02).
VALIDATION = {"val_every": 1, "val_skip_above_loss": None}


@dataclass(frozen=True)
class Expected:
    """A contender's time to the target, as its curve tells it."""

    low_s: float
    mid_s: float
    high_s: float
    """inf: at its pessimistic bound it never reaches the target within its schedule."""
    epoch: int
    """The epoch its expected ratio reaches the target at: what the measure stage exports
    (orchestrator/measure.py). Its plan's end where only its optimistic bound gets there."""
    ratio: float
    """Its error over the baseline's at equal progress (geometric mean: < 1 learns faster)."""
    margin: float = math.inf
    """How many standard errors its expected log ratio lies below the largest that still
    reaches the target by its plan's end (the baseline's final error scaled up to the
    target's): negative where it is expected to end short."""
    paced_s: float = math.nan
    """Its time to the target were it to learn as the baseline does (r = 0, what the predict
    stage assumes), at its own measured pace: over the prediction, how far the screen's few
    steps misjudged its pace (orchestrator/evidence.py `calibration`)."""

    @property
    def reach(self) -> float:
        """How likely it reaches the target by its plan's end: Phi(margin)."""
        return 0.5 * math.erfc(-self.margin / math.sqrt(2)) if math.isfinite(self.margin) \
            else float(self.margin > 0)


class BaselineCurve:
    """The baseline's best error so far against its progress (epoch / N): a monotone envelope,
    so one bad validation does not lower the bar."""

    def __init__(self, curve: list[list[float]]):
        n = max(int(e) for e, _, _ in curve)
        best, points = 0.0, []
        for epoch, score, _ in curve:
            best = max(best, float(score))
            points.append((int(epoch) / n, max(1.0 - best, 1e-6)))
        self.points, self.curve, self.epochs = points, curve, n
        self.noise = noise(curve)

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


def noise(curve: list[list[float]]) -> float:
    """How uncertain one point's log error ratio is, as the baseline's own curve scatters: the
    standard deviation of its log error's second differences from `RUNG` of its schedule on
    (the trend cancels; each difference holds 6 variances of one point's noise), times
    `NOISE_SCALE`. Within [NOISE_FLOOR, SIGMA]; SIGMA where fewer than 5 points tell it."""
    point = scatter(curve, RUNG, lambda s: math.log(max(1.0 - s, 1e-6)))
    return SIGMA if point is None else min(SIGMA, max(NOISE_FLOOR, NOISE_SCALE * point))


def log_ratio(baseline: BaselineCurve, points: list[tuple[float, float]]
              ) -> tuple[float, float]:
    """The posterior mean and standard error of a contender's log error ratio to the baseline's
    at equal progress: its points, weighted by their progress, against the prior r = 0."""
    weights = [p for p, _ in points]
    logs = [math.log(max(1.0 - s, 1e-6) / baseline.error_at(p)) for p, s in points]
    mean = sum(w * r for w, r in zip(weights, logs)) / sum(weights)
    spread = math.sqrt(sum(w * (r - mean) ** 2 for w, r in zip(weights, logs)) / sum(weights))
    precision = sum(weights) / max(spread, baseline.noise) ** 2
    posterior = precision + 1 / PRIOR ** 2
    return precision * mean / posterior, 1 / math.sqrt(posterior)


def expect(baseline: BaselineCurve, points: list[tuple[float, float]], target: float,
           planned: int, pace: tuple[int, float, float]) -> Expected | None:
    """A contender's expected time to the target from its validated `points` ((progress,
    score)), its schedule of `planned` epochs and its `pace` (epoch, training time at it, seconds
    an epoch after its first); None before `POINTS` points. `low_s` is inf where even its
    optimistic bound ends short of the target, `mid_s` where its expected ratio does."""
    if len(points) < POINTS:
        return None
    mean, se = log_ratio(baseline, points)
    epoch_now, time_now, per_epoch = pace
    below = points[-1][1] < target  # not there yet: no sooner than its next epoch

    def when(r: float) -> int | None:
        progress = baseline.progress_at((1.0 - target) / math.exp(r))
        if progress is None or progress > 1.0:
            return None
        epoch = max(1, math.ceil(progress * planned - 1e-9))
        return max(epoch, epoch_now + 1) if below else epoch

    def time_at(epoch: int | None) -> float:
        return math.inf if epoch is None else time_now + (epoch - epoch_now) * per_epoch

    soonest, expected, latest = when(mean - Z * se), when(mean), when(mean + Z * se)
    reached = first_at(baseline.curve, target)  # the epoch the prediction expects it at
    paced = time_at(epochs_to_target(planned, reached.epoch, baseline.epochs)) \
        if reached is not None else math.nan
    # If it gets there at all, it does by its plan's end: P learns as much as the baseline's N.
    latest = latest if latest is not None else (planned if soonest is not None else None)
    reaches = math.log((1.0 - target) / baseline.error_at(1.0))
    return Expected(time_at(soonest), time_at(expected), time_at(latest),
                    expected or planned, math.exp(mean), (reaches - mean) / se, paced)


class RaceRule:
    """The stopper's race rule for one search (orchestrator/stopper.py calls it on every
    report of a running contender); what it expects goes to the evidence."""

    def __init__(self, baseline: dict, target: float, evidence: Evidence,
                 decide_at: float = DECIDE_AT):
        self.curve = BaselineCurve(baseline["curve"])
        self.target, self.evidence = target, evidence
        # Both fractions of the share of a schedule the race reads (halfway to the target).
        share = horizon(baseline, target)
        self.rung, self.decide_at = RUNG * share, decide_at * share
        self.every = point_every(baseline, target)
        self._points: dict[str, list[tuple[float, float]]] = {}
        self._best: dict[str, float] = {}  # every validated epoch's best so far
        self._first: dict[str, tuple[int, float]] = {}

    def __call__(self, trial_id: str, result: dict) -> tuple[TrialStatus, str] | None:
        epoch = int(result.get("epoch") or 0)
        planned = int(result.get("epochs_planned") or 1)
        spent = float(result.get("train_time_s", 0.0))
        first = self._first.setdefault(trial_id, (epoch, spent))
        points = self._points.setdefault(trial_id, [])
        if validated(result) and result.get("val_score") is not None:
            # Its best so far over every epoch it validated, as the baseline's envelope: one bad
            # validation lowers neither side's curve. A point every `every`-th epoch (and at the
            # plan's end): as many as the race's noise and prior were replayed with.
            best = max(float(result["val_score"]), self._best.get(trial_id, 0.0))
            self._best[trial_id] = best
            if epoch % self.every == 0 or epoch >= planned:
                points.append((epoch / planned, best))
        if epoch / planned < self.rung or epoch <= first[0]:
            return None
        pace = (epoch, spent, (spent - first[1]) / (epoch - first[0]))
        found = expect(self.curve, points, self.target, planned, pace)
        if found is None:
            return None
        progress = epoch / planned
        if math.isinf(found.low_s) or (progress >= self.decide_at and found.margin < SHORT_AT):
            self.evidence.expected(trial_id, found.low_s, found.mid_s, found.high_s,
                                   found.epoch, found.reach, found.paced_s)
            return self._short(trial_id, result, found)
        # Expected by its plan's end where its expected ratio ends just short (the measured run
        # tells; a miss there sends the measure stage to the next fastest).
        mid = found.mid_s if math.isfinite(found.mid_s) else found.high_s
        self.evidence.expected(trial_id, found.low_s, mid, found.high_s, found.epoch,
                               found.reach, found.paced_s)
        bar = self.evidence.best_bound(besides=trial_id)
        if bar is not None and found.low_s > bar:
            return (TrialStatus.PRUNED,
                    f"extrapolated slower: at best {found.low_s:.1f} s to the target (its "
                    f"error {found.ratio:.2f}x the baseline's at equal progress), another "
                    f"reaches it by {bar:.1f} s")
        told = found.high_s <= TOLD * found.low_s and found.margin >= SHORT_AT
        if told or progress >= self.decide_at:
            if found.reach < LIKELY and isinstance(result.get("config"), dict):
                # the next goes to another model, and none that learns less (its expected
                # shortfall, as a cut's: far short, a finer precision cannot make it up)
                self.evidence.unlikely(result["config"], self.target - self._final(found))
            return (TrialStatus.DECIDED,
                    f"decided at {progress:.0%} of its schedule: expected at the target in "
                    f"{mid:.1f} s ({found.low_s:.1f}-{found.high_s:.1f} s; its error "
                    f"{found.ratio:.2f}x the baseline's at equal progress)")
        return None

    def _final(self, found: Expected) -> float:
        """The score it ends its plan at, as it learns: the baseline's final error scaled by its
        expected ratio."""
        return 1.0 - found.ratio * self.curve.error_at(1.0)

    def _short(self, trial_id: str, result: dict, found: Expected) -> tuple[TrialStatus, str]:
        """Cut as a miss: as it learns, it ends short of the target (the confirmations rule
        out what learns no more)."""
        final = self._final(found)
        config = result.get("config") if isinstance(result.get("config"), dict) else None
        self.evidence.missed(trial_id, max(0.0, self.target - final), config)
        return (TrialStatus.PRUNED,
                f"extrapolated short of the target: its error {found.ratio:.2f}x the "
                f"baseline's at equal progress ends near {final:.4f}, the target is "
                f"{self.target:.4f} ({found.margin:+.1f} standard errors from reaching it)")
