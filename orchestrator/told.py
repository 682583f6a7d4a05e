"""The race's expected times, as the measure stage finds them (orchestrator/measure.py).

After a miss the measure stage chooses what it trains next by time to the target: the missed
configuration's longer run at its own measured pace, or a contender not measured yet at the
race's expected time per chance of reaching it (orchestrator/records.py `per_chance_s`). The
race extrapolates that time from a quarter of a plan or less (orchestrator/screen/race.py), and
where it runs short, it runs short for several contenders of one search at once. At 128 unet3d
epochs (docs/benchmarks.md, 2026-12-06, 20:10) the race expected width 1, patch 16 at the
target in 12.9 s; its measured runs missed it at 34, 43, 54, 68 and 85 epochs (27.9 s of
training), and its 107 epochs (35.1 s) then waited for two width-0.5 contenders expected there in
30.4 and 30.9 s per chance: they missed at 68, 85 and 107 epochs and at 51 and 64, and one
reached it at 134, where the same seed's 107 epochs had reached it in an earlier draw. In the
week's 128-epoch searches that measured both widths, the wide one's runs took 1.1-3.3x the
race's time (to the target, or missed; about 2x most often), the thin ones' 1.1-1.7x or more.

So once a measured configuration has trained longer than the race expected it to need and still
missed, a contender not measured yet is expected later too: its expected time is scaled by the
measured runs' shortfall, to the power `SHARED`. Not below the race's own time: a miss only says
"later than"; and only after misses, so the first choice is the race's.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from trainables.status import TrialStatus

if TYPE_CHECKING:
    from orchestrator.records import TrialRecord

# How much of one configuration's shortfall against the race's time another shares: the race's
# part (the baseline's curve, how far it extrapolates), not the model's own. In the week's
# 128-epoch searches the thin contenders' log shortfall was 0.2-0.95 of the wide one's measured
# beside it (most of them floors: they missed); the square root, a judgment between.
SHARED = 0.5


def shortfall(measured) -> float:
    """How much later than the race expected the configurations measured so far (the measure
    stage's `Lengths`: `best`, `runs`) got to the target: over each one's expected time, its
    first time to the target, else the longest training it missed it in; the median, to the
    power `SHARED`; 1 where none tells (none the race decided, or nothing trained yet)."""
    ratios = []
    for lengths in measured:
        rec = lengths.best
        if rec.status != TrialStatus.DECIDED or not rec.told_s or rec.reached:
            continue
        reached = [r["time_to_target_s"] for r in lengths.runs
                   if r.get("reached") and r.get("time_to_target_s") is not None]
        missed = [float(r["train_time_s"]) for r in lengths.runs
                  if not r.get("reached") and r.get("train_time_s") is not None]
        seconds = reached[0] if reached else max(missed, default=None)
        if seconds is not None:
            ratios.append(seconds / rec.told_s)
    return max(1.0, statistics.median(ratios) ** SHARED) if ratios else 1.0


def late_per_chance(rec: TrialRecord, late: float) -> float | None:
    """`rec`'s time to the target per chance of reaching it, the race's expected time `late`
    times later where the race expected it and nothing measured it."""
    per = rec.per_chance_s
    if per is None or rec.reached or rec.status != TrialStatus.DECIDED:
        return per
    return per * late


def said(rec: TrialRecord, late: float) -> str:
    """How the measure stage says a time `late_per_chance` made later."""
    if late_per_chance(rec, late) == rec.per_chance_s:
        return ""
    return (f" (the race's {rec.per_chance_s:.1f} s, {late:.2f}x: the race's times of what was "
            f"measured ran short)")


def not_worth(rec: TrialRecord, baseline_s: float | None) -> str | None:
    """Why `rec` is not measured after a miss: even reaching the target, it gets there no
    sooner than the baseline's run (`baseline_s` of training) ends: it would hand over no
    speedup; None: it is measured. Its chance does not enter: one less likely but sooner may
    still pay."""
    baseline_s = float(baseline_s or math.inf)
    at = rec.told_s
    if at is not None and at < baseline_s:
        return None
    shown = "no expected time" if at is None else f"{at:.1f} s"
    return (f"{rec.trial_id} is expected at the target in {shown}, not before the "
            f"baseline's run ({baseline_s:.1f} s) ends")
