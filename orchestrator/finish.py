"""The finish stage: what a search leaves behind once its trials ran.

Every file here is written from the journal's records (orchestrator/records.py), so a search
stopped while writing them writes them again, whole, when resumed: the leaderboard (the baseline's
row with `role=baseline`), the best config, the Pareto set and plot, knob importance, and the
MLflow parent run's artifacts, metrics and every trial's `best_trial`/`pareto` tags.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.folder import SearchFolder
from orchestrator.importance import importance_artifacts, importance_lines, knob_importance
from orchestrator.pareto import pareto_png
from orchestrator.records import Role, TrialRecord
from orchestrator.report import add_baseline_row, economics, prediction_errors
from orchestrator.result import SearchResult, trials_table
from orchestrator.tracking import Tracker
from orchestrator.trial_book import TrialBook
from trainables.config import TrialConfig
from trainables.status import traits


def write_results(*, name: str, data_name: Any, knobs: list[str], base: dict[str, Any],
                  book: TrialBook, tracker: Tracker, objective, folder: SearchFolder,
                  baseline: dict | None, wall_s: float, search_cost_s: float,
                  earlier: list[TrialRecord] = (), artifacts: dict[str, str] | None = None
                  ) -> SearchResult:
    """Write every result file and the MLflow records; the search's result. `earlier`: results
    of earlier searches this one reused (leaderboard rows with role 'earlier')."""
    print(book.summary(), file=book.out, flush=True)
    trials = [r for r in book.records.values() if r.role == Role.TRIAL] + list(earlier)
    by_id = {r.trial_id: r for r in trials}
    table = trials_table(trials, knobs)
    best, best_config = None, None
    if not table.empty and traits(table.iloc[0]["status"]).rankable:
        best = table.iloc[0].to_dict()
        best_rec = by_id[best["trial_id"]]
        # With the profile's picks: what the best trial trained with.
        best_config = TrialConfig.from_dict({**base, **best_rec.knobs,
                                             **best_rec.picks}).to_dict()
        folder.best_config.write_text(json.dumps(
            {"name": name, "data": data_name, "config": best_config,
             "objective": objective.formula, "metrics": dict(best_rec.metrics)},
            indent=2, default=float))
    else:
        folder.best_config.unlink(missing_ok=True)  # not a stale one from an earlier search
    table = add_baseline_row(table, baseline, knobs)
    table.to_csv(folder.leaderboard, index=False)
    if "pareto" not in table.columns:  # no trial (earlier searches spent the budget): no front
        table["pareto"] = False
    front = table[table["pareto"] == True]  # noqa: E712
    front.to_csv(folder.pareto_csv, index=False)
    on_front = set(front["trial_id"]) if not front.empty else set()

    best_id = best["trial_id"] if best else None
    tags = {rid: {"best_trial": str(rid == best_id).lower(),
                  "pareto": str(rid in on_front).lower()} for rid in book.records}
    folder.pareto_png.write_bytes(pareto_png(
        table, best_id, title=f"search {name!r}: accuracy against training time"))
    artifacts = {
        **(artifacts or {}), "leaderboard.csv": folder.leaderboard.read_text(),
        "pareto.csv": folder.pareto_csv.read_text(), "pareto.png": folder.pareto_png.read_bytes(),
        # The formula with the baseline's score filled in (the header's may say S).
        "objective.txt": objective.formula + "\n\n" + (objective.__doc__ or "")}
    if best:
        artifacts["best_config.json"] = folder.best_config.read_text()
    importance = knob_importance(table, knobs, objective)
    artifacts.update(importance_artifacts(importance))
    if baseline:
        artifacts["baseline.json"] = json.dumps(baseline, indent=2, default=str)
    lines, money = economics(best, baseline, objective.baseline_s, search_cost_s,
                             prediction_errors(table))
    notes = importance_lines(importance) + lines
    tracker.end_search(artifacts, tags, {"search_wall_s": wall_s, "trials": float(len(trials)),
                                         **money}
                       | ({"best_objective": float(best["objective"])} if best else {}))
    return SearchResult(
        name=name, trials=table, best=best, best_config=best_config,
        output_dir=str(folder.root),
        best_config_path=str(folder.best_config) if best else None,
        leaderboard_path=str(folder.leaderboard), pareto_path=str(folder.pareto_csv),
        tracking_uri=tracker.location, experiment_name=name,
        parent_run_id=tracker.parent_run_id, objective_formula=objective.formula,
        wall_time_s=wall_s, knobs=knobs, baseline=baseline, notes=notes,
    )
