"""What a search with a baseline adds to its result: the baseline's leaderboard row, the headline
line ('best: 3.4x faster than baseline (0.912 vs 0.915)') and whether the search paid for itself
(issue 17, items 1, 2 and 6).
"""

from __future__ import annotations

import math

import pandas as pd

from orchestrator.baseline import baseline_row


def add_baseline_row(table: pd.DataFrame, record: dict | None, knobs: list[str]) -> pd.DataFrame:
    """Every trial gets role 'trial'; the baseline, if one ran, is appended with role
    'baseline' and rank 0 (after the trials, so the best trial stays the first row)."""
    if table.empty and record is None:
        return table
    table = table.copy()
    table["role"] = "trial"
    row = baseline_row(record, knobs)
    if row is None:
        return table
    return pd.concat([table, pd.DataFrame([row])], ignore_index=True)


def headline(best: dict | None, record: dict | None, baseline_s: float | None,
             search_cost_s: float) -> list[str]:
    """The speedup of the best trial and the search's payback, as printable lines; [] without a
    baseline or a best trial."""
    if not best or record is None or not baseline_s:
        return []
    speedup = best.get("speedup_vs_baseline", math.nan)
    if speedup is None or not speedup == speedup:  # NaN: the best never matched the baseline
        return [f"best: did not reach the baseline's score ({best.get('val_score', math.nan):.4f}"
                f" vs {record['val_score']:.4f}); no speedup to claim"]
    lines = [f"best: {speedup:.1f}x faster than baseline ({best['val_score']:.3f} vs "
             f"{record['val_score']:.3f})"]
    saved = baseline_s * (1 - 1 / speedup)
    lines.append(f"search cost        {search_cost_s:.0f} s (baseline included)")
    if saved > 0:
        lines.append(f"payback            after {search_cost_s / saved:.1f} full runs "
                     f"(each saves {saved:.1f} s: {baseline_s:.1f} s -> "
                     f"{baseline_s / speedup:.1f} s)")
    else:
        lines.append("payback            never: the best is not faster than the baseline")
    return lines
