"""The learning-curve models benchmarks/curve_models.py sets against the race's (issue 41): the
parametric fits find what made the points, their bootstrap says how sure they are, and the
replay decides a run from its first epochs alone and scores it against its end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import curve_models as cm


def test_the_fits_recover_the_curve_that_made_the_points():
    p = np.linspace(0.05, 0.3, 8)
    for kind, (c, a, shape), err in [("pow3", (0.02, 0.05, 0.7), 0.1),
                                     ("exp3", (0.03, 0.4, 6.0), 0.1)]:
        made = c + a * cm.basis(kind, shape, p)
        fitted = cm.fit(kind, p, made)
        truth = (a / (err - c)) ** (1 / shape) if kind == "pow3" else \
            -math.log((err - c) / a) / shape
        assert cm.crossing(kind, fitted, err) == pytest.approx(truth, rel=0.05)
        assert cm.crossing(kind, fitted, c / 2) == math.inf  # below the asymptote: never
    assert cm.fit("pow3", p[:2], p[:2]) is None  # two points fit any curve of three parameters


def test_the_bootstrap_is_sure_of_clean_points_and_says_never_below_the_asymptote():
    p = np.linspace(0.05, 0.3, 8)
    err = 0.02 + 0.05 * p ** -0.7
    rng = np.random.default_rng(0)
    told = cm.parametric("pow3", p, err, 0.1, rng)
    truth = (0.05 / 0.08) ** (1 / 0.7)
    assert told["reach"] == 1.0
    assert told["mid"] == pytest.approx(truth, rel=0.01) and told["high"] / told["low"] < 1.1
    never = cm.parametric("pow3", p, err, 0.01, rng)
    assert never["reach"] == 0.0 and never["low"] == math.inf


def curve(errors: list[float], per_epoch: float = 2.0) -> list[list[float]]:
    return [[e + 1, 1.0 - err, per_epoch * (e + 1)] for e, err in enumerate(errors)]


def test_a_run_that_learns_as_the_baseline_is_expected_where_the_baseline_got_there():
    errors = [0.5 * 0.85 ** e for e in range(32)]  # reaches 0.01 error at epoch 26
    base = {"curve": curve(errors), "epochs": 32}
    target = 0.99
    run = {"knobs": {"batch_size": 4}, "planned": 32, "curve": curve(errors, 1.0)}
    told = cm.decided(run, base, target, 0.25, "race", np.random.default_rng(0))
    assert told["at_epoch"] == 8 and told["real_s"] == pytest.approx(26.0)
    assert told["low_s"] <= told["real_s"] <= told["high_s"]
    assert told["mid_s"] == pytest.approx(26.0, rel=0.1) and told["reach"] > 0.5
    # One that reached the target before the decision point is not expected: it is known.
    early = {"knobs": {}, "planned": 32, "curve": curve([0.005] * 32)}
    assert cm.decided(early, base, target, 0.25, "pow3", np.random.default_rng(0))[
        "reached_before"]


def test_a_cut_that_would_have_beaten_the_pick_is_counted():
    rows = [  # the pick (fastest expected per chance) reaches at 30 s; the cut one at 20 s
        {"knobs": {"a": 1}, "real_s": 30.0, "low_s": 10.0, "mid_s": 15.0, "high_s": 28.0,
         "reach": 0.9},
        {"knobs": {"a": 2}, "real_s": 20.0, "low_s": 29.0, "mid_s": 40.0, "high_s": 60.0,
         "reach": 0.9},
        {"knobs": {"a": 3}, "real_s": math.inf, "low_s": math.inf, "mid_s": math.inf,
         "high_s": math.inf, "reach": 0.0},
    ]
    s = cm.scored(rows)
    assert s["pick"] == {"a": 1} and s["pick_over_best"] == pytest.approx(1.5)
    assert s["cut"] == 2 and s["cut_would_have_won"] == 1
    # Neither interval held its run's time; the last said never, and it never did.
    assert (s["reached"], s["covered"], s["reach_of_missed"]) == (2, 0, 0.0)
    assert s["brier"] == pytest.approx((0.1 ** 2 * 2) / 3)
