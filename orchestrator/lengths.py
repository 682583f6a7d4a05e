"""How long the answer is measured, and what each longer run goes on from (orchestrator/
measure.py trains them).

A measured run that misses the target is tried again longer, while that pays. Runs of the
race's schedule (warmup-stable-decay, its warm-up in epochs: orchestrator/screen/race.py) share
every step until the shorter one decays, over its last fifth: so a measured run keeps its
checkpoint where its decay begins (`decay_epoch`), and the next, longer run goes on from there
(`going_on_from`; trainables/loop/resume.py checks it, else it trains from scratch). A run of E2
epochs after one of E1 that missed then trains about E2 - 0.8 E1 epochs, not E2 - d from the
race's epoch d, and the lengths step up by a quarter (`attempts`) instead of jumping halfway to
the plan, where the first run's decay begins past the race's epoch (orchestrator/measure.py
`Lengths.of`; on a short plan no run could go on from another, and the old lengths stand).
At 60 classifier epochs two answers that missed by 0.002-0.005 at 29 and 47 epochs were
trained again at 46 and 68 from the race's epoch 16-17, 0.3-0.5 of a baseline run each
(docs/benchmarks.md).

**An answer holds only beyond a retrain's noise.** One run at one seed that ends just above
the target says little of the next seed's: the headline's answers, each the first length whose
single run reached the target, ended below it when trained again with other seeds in 5 of 9
classifier retrains and 2 of 9 unet3d ones, the runs that had ended 0.0015-0.0055 above it
(docs/benchmarks.md). So a run that reaches the target by less than `hold_margin` is on the
line: the measure stage trains it longer (orchestrator/measure.py), and hands over the first
that ends beyond the margin, else the longest that reached. First at the length its curve says
makes up the margin (`holding_length`), then, where that one is still on the line, a quarter
longer: a quarter step ended 2-4 margins above the target on the classifier (10 -> 13 took a run
0.0055 above its target to 0.0110 above, against a margin of 0.0058; docs/benchmarks.md), and
the answer is handed over at the length it trained.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from orchestrator.curves import scatter
from trainables.loop.schedules import DECAY_SHARE

if TYPE_CHECKING:
    from orchestrator.records import TrialRecord

# How the measure line names a run that went on from the race's winner (orchestrator/measure.py).
CONTENDER = "its contender's"

# A longer run is tried again where the last lengthening made up at least this share of what is
# still missing: the next adds about as many epochs (the middle length is halfway to the plan).
# Or where its steps so far, at their mean gain, make up what is missing by its plan: a quarter
# step of a unet3d run moves its score by noise as much as by length (width 1 at 128 epochs:
# +0.0080, then +0.0009 at 55 -> 69 epochs, 0.0080 short; it reached at 105 and 153).
LENGTHENING_PAYS = 0.5
# The halfway length is measured only where, reaching the target, it hands over a run at least
# this share shorter than the plan. Each attempt is a whole run: at 15 classifier epochs one
# search measured its answer at 13, 14 and 15 epochs (0.7405, 0.7505, 0.7565 against 0.755),
# 131 s of its 175-s cost, for a middle that could have saved one epoch in 15 (docs/
# benchmarks.md).
MIDDLE_SHORTER = 0.2
# The run's own validation noise: the spread of its last this many validated scores.
NOISE_POINTS = 4
# A retrain with another seed reaches the target at least ~84% of the time (one standard error
# of what one run tells of the next: `hold_margin`), where the measured run ended this far above.
HOLD_Z = 1.0
# The baseline's curve from this share of its schedule on tells one score's noise: the lr has
# come down to where the curve bends slowly (before, the trend's own turns read as noise).
NOISE_FROM = 0.5
# About this many validations a measured run, at most: its first epoch at the target is known to
# 1/32 of its run (late by that at worst), and its last epoch always validates. Validating every
# epoch, unet3d's 214-epoch answer took 105 s of wall for 59 s of training (docs/benchmarks.md).
MEASURE_POINTS = 32
# About this many a shorter run's (`_shorter`): its end decides it (at 32 unet3d epochs a
# 22-epoch shorter run validated 12 times, 5.0 s of its 13.9-s wall).
SHORTER_POINTS = 4


def attempts(reached: int, planned: int, branches: bool = False) -> list[int]:
    """The lengths the answer is measured at, shortest first, until one reaches the target:
    the epoch its confirmation first reached it at, halfway to its plan (where that is
    `MIDDLE_SHORTER` shorter than the plan, or more), its whole plan. Where each run `branches`
    (goes on from the decay's start of the one before: `decay_epoch`), a quarter longer each
    time up to its plan instead: the step costs 0.45 of the last run, not a whole run."""
    if branches:
        lengths = [min(reached, planned)]
        while lengths[-1] < planned:
            lengths.append(min(planned, max(lengths[-1] + 1,
                                            math.ceil(lengths[-1] / (1 - DECAY_SHARE) - 1e-9))))
        return lengths
    middle = (reached + planned + 1) // 2
    worth = planned - middle >= MIDDLE_SHORTER * planned
    return sorted({reached, planned} | ({middle} if worth else set()))


def decay_epoch(config: dict) -> int:
    """The epoch a run of the race's schedule keeps its checkpoint at: the last before its
    decay, where every longer run of it is still this run (trainables/loop/resume.py); 0 on any
    other schedule, or where its warm-up is not over by then."""
    if config.get("schedule") != "wsd" or config.get("warmup_epochs") is None:
        return 0
    epochs = int(config["epochs"])
    # Its steps and the next one's lr (set before the checkpoint) before the decay, which
    # starts at step 0.8 (S E - 1) of S steps an epoch: d S < 0.8 (S E - 1) for any S >= 1.
    epoch = math.ceil((1 - DECAY_SHARE) * (epochs - 1) - 1e-9) - 1
    # Checkpointed at that epoch alone (the last is the one kept): 2 * epoch past the run's end.
    ok = 1 <= epoch and epoch >= float(config["warmup_epochs"]) and 2 * epoch > epochs
    return epoch if ok else 0


def going_on_from(winner_rec: TrialRecord, runs: list[dict]
                  ) -> tuple[str | None, list, str, str]:
    """(checkpoint, the curve of its first epochs, whose, which run that is, as said) a
    measured run goes on from: the last run of it measured before, at its decay's start, where
    it has one and is further on than the race's winner; else the winner's, where the race
    stopped it."""
    earlier = [r for r in runs if r.get("decay_checkpoint") and r.get("decay_epoch")]
    if earlier and earlier[-1]["decay_epoch"] > winner_rec.epochs:
        last = earlier[-1]
        return (last["decay_checkpoint"], last["curve"], last["trial_id"],
                f"its {last['epochs']}-epoch run's")
    return winner_rec.checkpoint, winner_rec.curve, winner_rec.trial_id, CONTENDER


def why_not_longer(runs: list[dict], target: float, steps_left: int = 1) -> str | None:
    """Why no longer run of a configuration whose `runs` (shortest first) all missed is worth
    training; None: it is, after one (a schedule squeezed too far may be all that missed), or
    where the last lengthening made up `LENGTHENING_PAYS` of what is still missing, or its
    lengthenings so far, at their mean gain, make it up in the `steps_left` lengths to its plan,
    or what is still missing lies within the last run's validation noise (its last
    `NOISE_POINTS` scores' spread)."""
    if len(runs) < 2 or any(r.get("best_score") is None for r in runs):
        return None
    first, before, last = runs[0]["best_score"], runs[-2]["best_score"], runs[-1]["best_score"]
    missing = target - last
    scores = [point[1] for point in runs[-1].get("curve") or []][-NOISE_POINTS:]
    noise = statistics.stdev(scores) if len(scores) > 1 else 0.0
    if last - before >= LENGTHENING_PAYS * missing or \
            (last - first) / (len(runs) - 1) * steps_left >= missing or missing <= noise:
        return None
    return (f"{runs[-2]['epochs']} -> {runs[-1]['epochs']} epochs moved its best score "
            f"{last - before:+.4f} ({runs[0]['epochs']} -> {runs[-1]['epochs']}: "
            f"{last - first:+.4f}), {missing:.4f} still missing, {steps_left} lengths to its "
            "plan")


def score_noise(curve: list) -> float | None:
    """One validated score's noise, read off the baseline's own curve: the spread of its scores'
    second differences from `NOISE_FROM` of its schedule on (the trend cancels; each difference
    holds 6 variances of one score's), read robustly (orchestrator/curves.py `scatter`). Its
    standard deviation read a stretch at a high lr as noise: the 32-epoch unet3d baseline's
    second half starts there (Dice 0.936-0.959 epoch to epoch) and read 0.0059, where its
    answers' scores spread by 0.0006 and 0.0014 over 3 seeds each; the median absolute deviation
    reads 0.0009. On the headline's baselines it reads 0.0030-0.0079 (classifier) and
    0.0010-0.0034 (unet3d), where their answers' scores spread by 0.0044-0.0061 and 0.0018-
    0.0050 over 3 seeds each, in two runs of the headline (docs/benchmarks.md). One curve tells
    another configuration's seeds only roughly: unet3d's seed-1 baseline read 0.0010, where its
    answer (batch 2, 10 epochs) spread by 0.0050 and two of its three retrains missed. None
    where fewer than 5 points tell it."""
    return scatter(curve, NOISE_FROM, robust=True)


def retrain_noise(baseline_curve: list) -> float | None:
    """The standard error of what one run's best score tells of a retrain's: each holds one
    score's noise (`score_noise`), so sqrt(2) of it. None where the curve cannot tell."""
    noise = score_noise(baseline_curve)
    return math.sqrt(2) * noise if noise else None


def lengthening_chance(runs: list[dict], epochs: int, target: float,
                       noise: float | None) -> float:
    """How likely a run of `epochs` reaches the target, after `runs` (shortest first) that all
    missed: its best score expected at the last run's plus their gain per epoch over the epochs
    it adds, give or take a retrain's `noise`. 1 (the longer run goes as a sure thing) after one
    run, where nothing tells its gain yet, or where the noise is unknown. A step to the plan's
    end may add a third of the epochs of the step before: at 32 unet3d epochs one answer missed
    at 35, 44 and 47 epochs of its 47 (0.9520, 0.9534, 0.9530 against 0.9556), its last step
    expected +0.0005 where 0.0022 was missing; the next contender reached the target at once
    (docs/benchmarks.md, 2026-12-07)."""
    scored = [r for r in runs if r.get("best_score") is not None]
    if len(scored) < 2 or not noise or len(runs) != len(scored):
        return 1.0
    first, last = scored[0], scored[-1]
    added = int(last["epochs"]) - int(first["epochs"])
    if added <= 0:
        return 1.0
    gain = (last["best_score"] - first["best_score"]) / added
    expected = last["best_score"] + gain * (int(epochs) - int(last["epochs"]))
    return 0.5 * math.erfc((target - expected) / noise / math.sqrt(2))


def hold_margin(baseline_curve: list, tolerance: float | None = None) -> float:
    """How far above the target one measured run must end for a retrain with another seed to
    reach it ~84% of the time: `HOLD_Z` standard errors of the next run's score given this one's
    (each holds one score's noise: sqrt(2) of it). 0 where the baseline's curve cannot tell; at
    most the `tolerance`, so no answer is asked to beat the baseline's own S (a curve noisy
    throughout: the next seed's score may then fall short of the target as the baseline's own
    might)."""
    noise = retrain_noise(baseline_curve)
    margin = HOLD_Z * noise if noise else 0.0
    return margin if tolerance is None else min(margin, float(tolerance))


def holding_length(baseline_curve: list, epochs: int, planned: int, above: float,
                   margin: float, target: float) -> int | None:
    """The length at which a run of `planned` that ended `above` the target at `epochs` is
    expected to end `margin` above it, as the race models a contender (orchestrator/screen/
    race.py): its error a constant times the baseline's at equal progress, so its error falls
    by the share it must where the baseline's does. At least one epoch longer; None where the
    baseline's error never falls that far, or the run is already beyond the margin."""
    # Imported here: the race's package imports the measure stage, which imports this module.
    from orchestrator.screen.race import BaselineCurve

    if above >= margin or not baseline_curve:
        return None
    curve = BaselineCurve(baseline_curve)
    needed = curve.error_at(epochs / planned) * (1.0 - target - margin) / (1.0 - target - above)
    progress = curve.progress_at(needed)
    if progress is None:
        return None
    return max(int(epochs) + 1, math.ceil(progress * planned - 1e-9))


def to_hold(lengths: list[int], baseline_curve: list, epochs: int, planned: int, above: float,
            margin: float, target: float) -> list[int]:
    """The lengths a run on the line is trained at, until one ends beyond the margin: where its
    curve makes the margin up (`holding_length`), where that comes before the next of
    `lengths`; then that next, as before."""
    held = holding_length(baseline_curve, epochs, planned, above, margin, target)
    return ([held] if held is not None and held < lengths[0] else []) + lengths[:1]


def validation_cadence(config: dict, points: int = MEASURE_POINTS) -> dict:
    """A measured run validates every k-th epoch (and its last): about `points` times
    (validation changes nothing it learns: trainables/config.py SPEED_ONLY)."""
    every = round(int(config["epochs"]) / points)
    return {"val_every": max(int(config.get("val_every") or 1), every)}
