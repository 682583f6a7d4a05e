"""What mattered: knob importance after a search (issue 17, item 5).

Optuna's fANOVA evaluator (a random forest over the finished trials; needs scikit-learn) says how
much of the variation of a target each searched knob explains, for three targets separately:
the search's objective, accuracy (`val_score`) and time (`full_run_s`, the projected full run).
The finished trials are replayed into an in-memory Optuna study for this, so it works the same for
a resumed search and never touches the search's own sampler. Printed after the leaderboard and
logged on the parent MLflow run as `importance.csv` and `importance.png`.
"""

from __future__ import annotations

import io
import math

import pandas as pd

from trainables.status import RANKABLE

TARGETS = ("objective", "val_score", "full_run_s")
MIN_TRIALS = 3  # fewer finished trials say nothing about which knob mattered


def knob_importance(table: pd.DataFrame, knobs: list[str], objective=None) -> pd.DataFrame:
    """One row per searched knob, one column per target (fractions summing to 1 per column);
    empty when there are too few finished trials or nothing varied."""
    if table.empty or not knobs:
        return pd.DataFrame()
    rows = table[table["status"].isin(RANKABLE)]
    if "role" in rows:
        rows = rows[rows["role"] != "baseline"]
    varied = [k for k in knobs if k in rows and rows[k].nunique() > 1]
    if len(rows) < MIN_TRIALS or not varied:
        return pd.DataFrame()
    # Only now: the fANOVA evaluator imports scikit-learn's forests, 1.3-1.9 s here, which a
    # search of a few confirmations (most of them pruned) would pay for nothing.
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    dists = {k: CategoricalDistribution(sorted({_plain(v) for v in rows[k]}, key=str))
             for k in varied}
    out = pd.DataFrame(index=varied)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for target in TARGETS:
        column = target if target in rows and rows[target].notna().any() else None
        if column is None and target == "full_run_s":
            column = "train_time_s"
        if column is None:
            continue
        study = optuna.create_study(direction="maximize")
        for _, row in rows.iterrows():
            value = float(row[column])
            if not math.isfinite(value):
                continue
            study.add_trial(optuna.trial.create_trial(
                params={k: _plain(row[k]) for k in varied}, distributions=dists, value=value))
        if len(study.trials) < MIN_TRIALS:
            continue
        try:
            found = get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=0))
        except (ValueError, RuntimeError):  # e.g. every value equal: nothing to explain
            continue
        out[target] = pd.Series(found)
    out.index.name = "knob"
    return out.fillna(0.0).sort_values(list(out.columns)[:1], ascending=False) \
        if len(out.columns) else pd.DataFrame()


def importance_lines(importance: pd.DataFrame) -> list[str]:
    if importance.empty:
        return []
    lines = ["\nKnob importance (fANOVA; share of each target's variation)"]
    lines += importance.to_string(float_format=lambda v: f"{v:.2f}").splitlines()
    return lines


def importance_artifacts(importance: pd.DataFrame) -> dict[str, str | bytes]:
    if importance.empty:
        return {}
    return {"importance.csv": importance.to_csv(), "importance.png": _plot(importance)}


def _plot(importance: pd.DataFrame) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 0.5 * len(importance) + 1.8), dpi=100)
    ax = fig.add_subplot()
    height = 0.8 / max(len(importance.columns), 1)
    for i, target in enumerate(importance.columns):
        ax.barh([y + i * height for y in range(len(importance))], importance[target],
                height=height, label=target)
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(importance))], importance.index)
    ax.invert_yaxis()
    ax.set_xlabel("importance (fANOVA)")
    ax.set_title("what mattered: knob importance per target")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _plain(value):
    return value.item() if hasattr(value, "item") else value
