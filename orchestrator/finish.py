"""The finish stage: what a search leaves behind once its trials ran.

Every file here is written from the journal's records (orchestrator/records.py) and the stages'
files, so a search stopped while writing them writes them again, whole, when resumed: the
leaderboard (the baseline's row with `role=baseline`, the measured answer's with
`role=measured`), the best config, the economics (orchestrator/economics.py), the Pareto set and
plot, knob importance, and the MLflow parent run's artifacts, metrics and every trial's
`best_trial`/`pareto` tags.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from orchestrator import economics as economy
from orchestrator.importance import importance_artifacts, importance_lines, knob_importance
from orchestrator.pareto import pareto_png
from orchestrator.records import Role
from orchestrator.report import add_baseline_row, prediction_errors, projected_economics
from orchestrator.result import SearchResult, trials_table
from orchestrator.stages import Stage, StageContext
from trainables.config import TrialConfig
from trainables.status import RANKABLE


def write_results(ctx: StageContext, strategy, *, measured: dict | None, wall_s: float,
                  cost_s: float) -> SearchResult:
    """Write every result file and the MLflow records; the search's result. `measured`: the
    answer trained as it is handed over (measured.json), if the search measured one."""
    book, folder, objective = ctx.book, ctx.folder, ctx.objective
    print(book.summary(), file=book.out, flush=True)
    knobs = strategy.knobs(ctx)
    trials = [r for r in book.records.values() if r.role == Role.TRIAL] + strategy.earlier()
    table = trials_table(trials, knobs)
    # The first rankable row: a race's decided contenders rank among them, but what they
    # expect is not a result (the answer is the measure stage's run).
    rankable = table[table["status"].isin(RANKABLE)] if not table.empty else table
    best = rankable.iloc[0].to_dict() if not rankable.empty else None
    best_config = _best_config(ctx, strategy, measured, best, trials)
    table = _with_reference_rows(table, ctx.baseline, measured, knobs)
    table.to_csv(folder.leaderboard, index=False)
    front = table[table["pareto"] == True]  # noqa: E712
    front.to_csv(folder.pareto_csv, index=False)
    on_front = set(front["trial_id"]) if not front.empty else set()
    best_id = best["trial_id"] if best else None
    tags = {rid: {"best_trial": str(rid == best_id).lower(),
                  "pareto": str(rid in on_front).lower()} for rid in book.records}
    folder.pareto_png.write_bytes(pareto_png(
        table, best_id, title=f"search {ctx.spec.name!r}: accuracy against training time"))
    importance = knob_importance(table, knobs, objective)
    lines, money = _economics(ctx, strategy, measured, best, cost_s, table)
    artifacts = {**strategy.artifacts(ctx), **_artifacts(ctx, best_config, measured),
                 **importance_artifacts(importance)}
    ctx.tracker.end_search(artifacts, tags, {"search_wall_s": wall_s, "trials": float(len(trials)),
                                      **money}
                    | ({"best_objective": float(best["objective"])} if best else {}))
    return SearchResult(
        name=ctx.spec.name, trials=table, best=best, best_config=best_config,
        output_dir=str(folder.root),
        best_config_path=str(folder.best_config) if best_config else None,
        leaderboard_path=str(folder.leaderboard), pareto_path=str(folder.pareto_csv),
        tracking_uri=ctx.tracker.location, experiment_name=ctx.spec.name,
        parent_run_id=ctx.tracker.parent_run_id, objective_formula=objective.formula,
        wall_time_s=wall_s, knobs=knobs, baseline=ctx.baseline,
        notes=importance_lines(importance) + lines,
        economics=json.loads(folder.economics.read_text()) if folder.economics.is_file()
        else None)


def _best_config(ctx: StageContext, strategy, measured: dict | None, best: dict | None,
                 trials) -> dict | None:
    """What is handed over (best_config.json): the measured answer where the search measured
    one (its epochs, its schedule planned for them), else the best trial's full config with
    its profile's picks; nothing when no trial can be handed over."""
    folder = ctx.folder
    if measured is not None or Stage.MEASURE in strategy.stages(ctx.objective):
        config = measured["config"] if measured and measured["reached"] else None
        metrics = {k: measured[k] for k in ("train_time_s", "time_to_target_s", "best_score",
                                            "epochs")} if config else {}
    elif best:
        rec = next(r for r in trials if r.trial_id == best["trial_id"])
        config = TrialConfig.from_dict({**ctx.prepared.base, **rec.knobs,
                                        **rec.picks}).to_dict()
        metrics = dict(rec.metrics)
    else:
        config = None
    if config is None:
        folder.best_config.unlink(missing_ok=True)  # not a stale one from an earlier search
        return None
    folder.best_config.write_text(json.dumps(
        {"name": ctx.spec.name, "data": ctx.spec.to_dict()["data"], "config": config,
         "objective": ctx.objective.formula, "metrics": metrics}, indent=2, default=float))
    return config


def _with_reference_rows(table: pd.DataFrame, baseline: dict | None, measured: dict | None,
                         knobs: list[str]) -> pd.DataFrame:
    table = add_baseline_row(table, baseline, knobs)
    if measured is not None:
        row = {"trial_id": measured["trial_id"], "status": measured["status"],
               **{k: measured["config"].get(k) for k in knobs},
               "planned_epochs": measured["epochs"], "val_score": measured["best_score"],
               "train_time_s": measured["train_time_s"],
               "time_to_target_s": measured["time_to_target_s"],
               "speedup_vs_baseline": (baseline["train_time_s"] / measured["train_time_s"])
               if baseline and measured["reached"] else float("nan"), "role": "measured"}
        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
    if "pareto" not in table.columns:  # no trial (earlier searches spent the budget): no front
        table["pareto"] = False
    table["pareto"] = table["pareto"].fillna(False).astype(bool)
    return table


def _economics(ctx: StageContext, strategy, measured: dict | None, best: dict | None,
               cost_s: float, table: pd.DataFrame) -> tuple[list[str], dict[str, float]]:
    """The summary's lines and the parent run's metrics. Under a target with a baseline:
    economics.json, by its one definition; otherwise projected full runs."""
    folder, baseline, objective = ctx.folder, ctx.baseline, ctx.objective
    folder.economics.unlink(missing_ok=True)
    if baseline is None:
        return [], {}
    if not objective.needs_baseline:
        return projected_economics(best, baseline, objective.baseline_s, cost_s)
    e = economy.compute(baseline=baseline, target=objective.target, measured=measured,
                        cost_s=cost_s, confirmations=ctx.book.finished(Role.TRIAL),
                        loop_alone_s=strategy.loop_alone_s(ctx), base=ctx.prepared.base,
                        stage_s=_stage_costs(ctx))
    e.write(folder.economics)
    return economy.lines(e, baseline, prediction_errors(table)), e.metrics()


def _stage_costs(ctx: StageContext) -> dict[str, float]:
    """Each recorded stage's wall time, the baseline's run left out where this search trained
    it (the user makes that run anyway: orchestrator/economics.py)."""
    stages = dict(ctx.folder.read_state().get("stage_s") or {})
    if (ctx.baseline or {}).get("search_id") == ctx.search_id:
        stages.pop("baseline", None)
    return stages


def _artifacts(ctx: StageContext, best_config: dict | None, measured: dict | None
               ) -> dict[str, Any]:
    folder, objective = ctx.folder, ctx.objective
    out: dict[str, Any] = {
        "leaderboard.csv": folder.leaderboard.read_text(),
        "pareto.csv": folder.pareto_csv.read_text(), "pareto.png": folder.pareto_png.read_bytes(),
        # The formula with the baseline's score filled in (the header's may say S).
        "objective.txt": objective.formula + "\n\n" + (objective.__doc__ or "")}
    for name, path in (("best_config.json", folder.best_config),
                       ("economics.json", folder.economics),
                       ("measured.json", folder.measured)):
        if path.is_file():
            out[name] = path.read_text()
    if ctx.baseline:
        out["baseline.json"] = json.dumps(ctx.baseline, indent=2, default=str)
    return out
