"""SearchResult: every trial as a table, the best trial and its full config, and where things are."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from orchestrator.pareto import pareto_mask
from trainables.loop.profile import PICK_PREFIX
from trainables.status import RANKABLE, TrialStatus
from orchestrator.records import TrialRecord

LEADERBOARD_METRICS = ["val_score", "train_time_s", "full_run_s", "samples_per_s",
                       "objective", "speedup_vs_baseline", "time_to_target_s",
                       "expected_time_to_target_s", "expected_low_s", "expected_high_s",
                       "expected_reach",
                       "predicted_time_to_target_s", "prediction_error",
                       "predicted_at_start_s", "start_prediction_error", "fixed_cost_s",
                       "profile_s"]


def trials_table(records: list[TrialRecord], knobs: list[str]) -> pd.DataFrame:
    """One row per trial, best first: rankable trials by objective, a race's decided
    contenders among them, then the rest by objective.

    A decided contender ranks by its expected seconds to the target per chance of reaching it,
    as the measure stage tries them (`TrialRecord.per_chance_s`), among trials that reached the
    target in as many seconds (their objective is minus those seconds: only a time-to-target
    objective races). Its own objective holds only the score it had when the race stopped it,
    at a quarter of its plan or less: ranked by that, the contender the answer came from sat
    below slower ones (the README's example, rank 2 of 3 expected fastest)."""
    rows = []
    for rec in records:
        told = rec.per_chance_s if rec.status == TrialStatus.DECIDED else None
        row: dict[str, Any] = {"trial_id": rec.trial_id, "status": str(rec.status),
                               "_told": math.nan if told is None else -told}
        row.update({k: rec.knobs.get(k) for k in knobs})
        # The speed profile's picks, one column per switch ('pick.channels_last').
        row.update({PICK_PREFIX + k: v for k, v in rec.picks.items()})
        row.update({k: rec.metrics.get(k, math.nan) for k in LEADERBOARD_METRICS})
        row.update({k: rec.metrics[k] for k in TASK_METRICS if k in rec.metrics})
        row["epochs"] = rec.epochs  # trained; a trial that planned its own length says so:
        if "epochs" in rec.knobs:
            row["planned_epochs"] = rec.knobs["epochs"]
        row["restarts"] = int(rec.metrics.get("restarts", 0))  # resumes after a worker died
        row["trial_wall_s"] = rec.wall_s if rec.wall_s is not None else math.nan
        row["reason"] = rec.reason or ""
        row["role"] = str(rec.role)
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_rankable"] = df["status"].isin(RANKABLE)
    df["_first"] = df["_rankable"] | df["_told"].notna()
    df["_key"] = df["_told"].fillna(df["objective"])
    # The non-dominated set among trials that ran to a valid end.
    df["pareto"] = False
    ok = df.index[df["_rankable"] & df["val_score"].notna() & df["train_time_s"].notna()]
    if len(ok):
        df.loc[ok, "pareto"] = pareto_mask(df.loc[ok, "val_score"].tolist(),
                                           df.loc[ok, "train_time_s"].tolist())
    df = df.sort_values(["_first", "_key"], ascending=[False, False], na_position="last")
    df = df.drop(columns=["_rankable", "_first", "_key", "_told"]).reset_index(drop=True)
    df.insert(0, "rank", range(1, len(df) + 1))
    return df


# Task metrics shown after the knobs when trials report them (segmentation: Dice and IoU, and
# the activation memory that gradient checkpointing trades for time).
TASK_METRICS = ["val_dice", "val_iou", "activation_mb"]


# The console table's width: a terminal's, and what the README's example shows.
WIDTH = 120
# Compact columns after the knobs, and their short names.
COMPACT = {"planned_epochs": "epochs", "val_score": "score", "time_to_target_s": "to_target_s",
           "expected_reach": "chance", "train_time_s": "train_s",
           "speedup_vs_baseline": "speedup", "predicted_time_to_target_s": "predicted_s"}


def compact(trials: pd.DataFrame, knobs: list[str]) -> str:
    """The leaderboard in at most WIDTH columns: only the knobs whose values differ between
    rows, and the measures that decide: time to the target where there is one (a race's
    expected time, marked ~, where it was told and not measured, and its chance of reaching
    the target by its plan's end: the two rank it), else training time. Knob columns that
    still do not fit are left to the wide table and the CSV."""
    trials = trials.copy()
    told = trials["time_to_target_s"].isna() & trials["expected_time_to_target_s"].notna() \
        if "expected_time_to_target_s" in trials else None
    if told is not None and (trials["time_to_target_s"].notna() | told).any():
        trials["time_to_target_s"] = [
            f"~{e:,.4g}" if t else (f"{v:,.4g}" if pd.notna(v) else "-")
            for t, v, e in zip(told, trials["time_to_target_s"],
                               trials["expected_time_to_target_s"])]
    varied = [k for k in knobs if k in trials and trials[k].nunique(dropna=False) > 1]
    measures = [c for c in COMPACT if c in trials and trials[c].notna().any()]
    if "time_to_target_s" in measures:
        measures.remove("train_time_s")
    while True:
        cols = ["rank", "trial_id", "status", *varied, *measures, "role"]
        table = trials[[c for c in cols if c in trials]].rename(columns=COMPACT)
        text = table.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:,.4g}")
        if max(map(len, text.splitlines())) <= WIDTH or not varied:
            return text
        varied = varied[:-1]


def task_columns(table: pd.DataFrame) -> list[str]:
    if "val_dice" not in table.columns:
        return []
    return [k for k in TASK_METRICS if k in table.columns]


@dataclass
class SearchResult:
    name: str
    trials: pd.DataFrame
    """Every trial, best first (see `trials_table`)."""
    best: dict[str, Any] | None
    """The best rankable trial's row, or None if no trial completed (a race's decided trials
    are not ranked: its answer is `best_config`, the run the measure stage trained)."""
    best_config: dict[str, Any] | None
    """What is handed over, a complete TrialConfig as a dict (what `orchestrator train` runs):
    the measured answer where the search measured one, else the best trial's."""
    output_dir: str
    best_config_path: str | None
    leaderboard_path: str
    pareto_path: str
    """The non-dominated trials (accuracy vs time) as CSV."""
    tracking_uri: str
    experiment_name: str
    parent_run_id: str | None
    objective_formula: str
    wall_time_s: float
    knobs: list[str] = field(default_factory=list)
    """The searched knobs (the leaderboard's config columns)."""
    baseline: dict[str, Any] | None = None
    """The baseline trial's record (orchestrator/baseline.py), or None without one."""
    notes: list[str] = field(default_factory=list)
    """Lines printed after the leaderboard: knob importance, speedup, payback."""
    economics: dict[str, Any] | None = None
    """economics.json (orchestrator/economics.py), for a search with a target and a baseline."""

    def leaderboard(self, knobs: list[str] | None = None, wide: bool = False) -> str:
        """The table as text: every column with `wide` (as leaderboard.csv holds it), else
        what fits a terminal (`WIDTH`): the knobs that vary, status, score, time to the target
        (or training time), speedup and prediction."""
        if self.trials.empty:
            return "(no trials ran)"
        knobs = self.knobs if knobs is None else knobs
        if wide:
            picks = [c for c in self.trials.columns if c.startswith(PICK_PREFIX)]
            cols = ["rank", "trial_id", "status"] + knobs + task_columns(self.trials) + picks \
                + ["planned_epochs"] + LEADERBOARD_METRICS + ["pareto", "role"]
            table = self.trials[[c for c in cols if c in self.trials.columns]]
            table = table.dropna(axis=1, how="all")  # e.g. speedup without a baseline
            return table.to_string(index=False, float_format=lambda v: f"{v:,.4g}")
        return compact(self.trials, knobs)

    def mlflow_ui_command(self) -> str:
        uri = self.tracking_uri
        if uri.startswith(("http://", "https://")):
            return f"open {uri} in a browser"
        return f"mlflow ui --backend-store-uri {uri} --workers 1"
