"""A learning curve, and the first point on it at a target: computed here, once, for everyone.

A curve is the [epoch, val_score, train_time_s] of each validated epoch of a run, in order (an
epoch that skipped its validation is no point of it). The baseline's lives in baseline.json, a
trial's in its record (orchestrator/records.py); the objective keeps the curve of the trial it
scores. Where a run first reached a target decides its time to the target (the objective, the
economics), the epochs a candidate is predicted to need (orchestrator/screen/predict.py) and where
a confirmation may skip its validations (orchestrator/stopper.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import NamedTuple


# A normal distribution's standard deviation over its median absolute deviation.
NORMAL_MAD = 1.4826


class Point(NamedTuple):
    epoch: int
    score: float
    seconds: float
    """Training time (train_time_s) at the end of this epoch."""


def first_at(curve: Sequence[Sequence[float]], target: float) -> Point | None:
    """The first point of `curve` whose score is at or above `target`; None if it never is."""
    for epoch, score, seconds in curve:
        if score >= target:
            return Point(int(epoch), float(score), float(seconds))
    return None


def best_score(curve: Sequence[Sequence[float]]) -> float | None:
    return max((float(s) for _, s, _ in curve), default=None)


def scatter(curve: Sequence[Sequence[float]], from_share: float,
            value: Callable[[float], float] = float, robust: bool = False) -> float | None:
    """One point's noise on `curve` from `from_share` of its epochs on, in `value`s of its
    scores: the standard deviation of their second differences (the trend cancels; each holds 6
    variances of one point's), over sqrt(6). `robust`: read as NORMAL_MAD times their median
    absolute deviation instead, the same for normal noise but blind to a few large moves (a dip,
    a stretch at a high lr) that the standard deviation reads as noise. None where fewer than 5
    points tell it."""
    if not curve:
        return None
    n = max(int(e) for e, _, _ in curve)
    values = [value(float(s)) for e, s, _ in curve if int(e) / n >= from_share]
    if len(values) < 5:
        return None
    second = [a - 2 * b + c for a, b, c in zip(values, values[1:], values[2:])]
    if robust:
        middle = statistics.median(second)
        spread = NORMAL_MAD * statistics.median(abs(d - middle) for d in second)
    else:
        spread = statistics.pstdev(second)
    return spread / math.sqrt(6)
