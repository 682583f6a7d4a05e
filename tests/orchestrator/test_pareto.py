"""The Pareto set of a search (max accuracy, min time) and its plot: pure functions, no Ray."""

from __future__ import annotations

import math

import pandas as pd

from orchestrator.pareto import pareto_png, pareto_set


def _table(rows):
    return pd.DataFrame(rows, columns=["trial_id", "status", "val_score", "train_time_s"])


def test_pareto_set_keeps_only_trials_nothing_beats_on_both():
    table = _table([
        ("accurate", "completed", 0.90, 4.0),
        ("fast", "early_stopped", 0.80, 2.0),
        ("dominated", "completed", 0.70, 5.0),
        ("tie", "completed", 0.90, 4.0),  # equal is not better: both stay
        ("failed_fast", "failed", 0.99, 0.1),  # not rankable: never on the set
        ("no_time", "completed", 0.95, math.nan),
    ])
    assert pareto_set(table) == {"accurate", "fast", "tie"}


def test_pareto_set_of_nothing_is_empty():
    assert pareto_set(pd.DataFrame()) == set()
    assert pareto_set(_table([("f", "failed", math.nan, math.nan)])) == set()


def test_pareto_png_is_a_png_with_or_without_trials():
    table = _table([("a", "completed", 0.9, 4.0), ("b", "completed", 0.8, 2.0)])
    for t, best in ((table, "a"), (table.iloc[0:0], None)):
        png = pareto_png(t, best)
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000
