"""The accuracy/time trade-off of a search: its Pareto set and a plot of it.

A trial is in the Pareto set when no other trial is at least as accurate *and* at least as fast,
and strictly better in one of the two: those are the only trials worth choosing between, whatever
weight one puts on time.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import pandas as pd

from orchestrator.objective import ACCURACY, TIME
from trainables.status import RANKABLE


def pareto_mask(scores: Sequence[float], times: Sequence[float]) -> list[bool]:
    """True where no other point has score >= and time <= with at least one strictly better."""
    points = list(zip(scores, times))
    return [not any(s_j >= s_i and t_j <= t_i and (s_j > s_i or t_j < t_i)
                    for j, (s_j, t_j) in enumerate(points) if j != i)
            for i, (s_i, t_i) in enumerate(points)]


def _points(table: pd.DataFrame) -> pd.DataFrame:
    """Rankable trials with both an accuracy and a time (a failed trial is no trade-off)."""
    if table.empty:  # trials_table() of no trials has no columns either
        return pd.DataFrame(columns=["trial_id", ACCURACY, TIME])
    rows = table[table["status"].isin(RANKABLE)]
    return rows[rows[ACCURACY].map(_finite) & rows[TIME].map(_finite)]


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def pareto_set(table: pd.DataFrame) -> set[str]:
    """Trial ids of the non-dominated trials: max val_score, min train_time_s."""
    points = _points(table)
    mask = pareto_mask(points[ACCURACY].tolist(), points[TIME].tolist())
    return {tid for tid, on in zip(points["trial_id"], mask) if on}


def pareto_png(table: pd.DataFrame, best_trial_id: str | None, title: str = "") -> bytes:
    """Accuracy against training time, one dot per trial, the Pareto set joined and highlighted,
    the best trial (by the search's objective) labelled. Returns the PNG's bytes."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a cluster head node
    from matplotlib.figure import Figure

    points = _points(table)
    front = pareto_set(table)
    fig = Figure(figsize=(7, 4.5), dpi=100)
    ax = fig.add_subplot()
    rest = points[~points["trial_id"].isin(front)]
    ax.scatter(rest[TIME], rest[ACCURACY], color="#9aa5b1", label="trial", zorder=2)
    on_front = points[points["trial_id"].isin(front)].sort_values(TIME)
    ax.plot(on_front[TIME], on_front[ACCURACY], "-o", color="#d1495b", zorder=3,
            label="Pareto set (no trial is both faster and more accurate)")
    best = points[points["trial_id"] == best_trial_id]
    if not best.empty:
        x, y = float(best[TIME].iloc[0]), float(best[ACCURACY].iloc[0])
        ax.scatter([x], [y], s=220, facecolors="none", edgecolors="black", zorder=4,
                   label="best by objective")
        ax.annotate(f"best: {best_trial_id}", (x, y), xytext=(8, -14),
                    textcoords="offset points", fontsize=9)
    if points.empty:
        ax.text(0.5, 0.5, "no trial completed", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("training time, s (train_time_s; lower is better)")
    ax.set_ylabel("validation accuracy (higher is better)")
    ax.set_title(title or "accuracy against training time")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
