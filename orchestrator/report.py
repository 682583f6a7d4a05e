"""What a search with a baseline adds to its result: the baseline's leaderboard row, the
confirmed trials' predicted against measured times, and, for a search without a target, the
projected economics: how much faster the best trial's projected full run is, what the search
cost in baseline runs, after how many runs it pays back (with a target: orchestrator/
economics.py).

    cost (baseline runs) = the search's wall time, the baseline's own run excluded
                           / the baseline's training time
    payback (runs)       = that cost / the training time the best saves per run
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pandas as pd

from orchestrator.baseline import baseline_row


def add_baseline_row(table: pd.DataFrame, record: dict | None, knobs: list[str]) -> pd.DataFrame:
    """The baseline, if there is one, is appended with role 'baseline' and rank 0 (after the
    trials, so the best trial stays the first row); rows without a role are trials."""
    if table.empty and record is None:
        return table
    table = table.copy()
    if "role" not in table.columns:
        table["role"] = "trial"
    row = baseline_row(record, knobs)
    if row is None:
        return table
    return pd.concat([table, pd.DataFrame([row])], ignore_index=True)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def prediction_errors(table: pd.DataFrame) -> list[dict]:
    """Confirmed trials that reached the target with a prediction: predicted, measured, error."""
    if table.empty or "prediction_error" not in table.columns:
        return []
    rows = table[table["prediction_error"].notna()]
    return [{"trial_id": r["trial_id"], "predicted_s": r["predicted_time_to_target_s"],
             "measured_s": r["time_to_target_s"], "error": r["prediction_error"],
             "at_start_s": r.get("predicted_at_start_s", math.nan),
             "start_error": r.get("start_prediction_error", math.nan)}
            for _, r in rows.iterrows()]


def projected_economics(best: dict | None, record: dict | None, baseline_s: float | None,
                        search_cost_s: float, errors: list[dict] = ()
                        ) -> tuple[list[str], dict[str, float]]:
    """Without a target (objectives weighted, pareto): the best trial's projected full run
    against the baseline's, the summary's lines and the parent run's metrics; nothing without
    a baseline. A search with a target states its economics by their one definition instead
    (orchestrator/economics.py)."""
    if record is None or not baseline_s:
        return [], {}
    metrics = {"search_cost_s": search_cost_s,
               "search_cost_baseline_runs": search_cost_s / baseline_s}
    cost = (f"search cost        {search_cost_s:.0f} s = "
            f"{metrics['search_cost_baseline_runs']:.1f} baseline runs "
            f"(the baseline's own run excluded; one run to its score: {baseline_s:.1f} s)")
    if not best:
        return [cost], metrics
    speedup = best.get("speedup_vs_baseline", math.nan)
    if not _finite(speedup):  # the best never matched the baseline
        return [f"best: did not reach the baseline's score ({best.get('val_score', math.nan):.4f}"
                f" vs {record['val_score']:.4f}); no speedup to claim", cost], metrics
    metrics["speedup"] = speedup
    lines = [f"best: {speedup:.2f}x faster than baseline ({best['val_score']:.3f} vs "
             f"{record['val_score']:.3f})", cost]
    saved = baseline_s * (1 - 1 / speedup)
    if saved > 0:
        metrics["payback_runs"] = search_cost_s / saved
        lines.append(f"payback            after {metrics['payback_runs']:.1f} runs (each saves "
                     f"{saved:.1f} s: {baseline_s:.1f} s -> {baseline_s / speedup:.1f} s)")
    else:
        lines.append("payback            never: the best is not faster than the baseline")
    for e in errors:
        start = f"; {e['at_start_s']:.1f} s re-timed at its start ({e['start_error']:+.0%})" \
            if _finite(e.get("start_error")) else ""
        lines.append(f"predicted/measured {e['trial_id']}: {e['predicted_s']:.1f} s predicted, "
                     f"{e['measured_s']:.1f} s to the target ({e['error']:+.0%}){start}")
    if errors:
        metrics["prediction_error"] = statistics.median(abs(e["error"]) for e in errors)
    started = [abs(e["start_error"]) for e in errors if _finite(e.get("start_error"))]
    if started:
        metrics["start_prediction_error"] = statistics.median(started)
    return lines, metrics
