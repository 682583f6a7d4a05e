"""The search driver: validate -> load data once -> Ray Tune + Optuna over Ray Train trials ->
leaderboard, best config, MLflow records.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import yaml

from orchestrator import resources
from orchestrator.interrupt import Interrupts, close_interrupted
from orchestrator.pareto import pareto_png
from orchestrator.result import SearchResult, trials_table
from orchestrator.spec import SearchSpec
from orchestrator.tracking import MlflowTracker, Tracker
from orchestrator.trial_book import TrialBook
from search_spaces import SpaceContext, check_space, domain_values, resolve_space
from search_spaces.inputs import check_inputs, default_patch
from search_spaces.pin import describe_pinned, pin
from search_spaces.warm_start import warm_start_points
from trainables.config import TrialConfig
from trainables.data.arrays import ArrayData, with_spatial_dims
from trainables.workloads import workload_data


def load_spec_data(spec: SearchSpec) -> ArrayData:
    """The spec's arrays, read with its `spatial_dims` (None: inferred from the shape)."""
    data = spec.arrays or workload_data(spec.workload, spec.data)
    return with_spatial_dims(data, spec.spatial_dims)


def prepare(spec: SearchSpec, data: ArrayData, total_cpus: int, total_gpus: int,
            worker_cpus: int | None = None):
    """Resolve and check the space against the hardware and data: every error before any trial."""
    probe_ctx = SpaceContext(use_gpu=total_gpus > 0, cpus_per_trial=spec.cpus_per_trial or
                             total_cpus, gpus_per_trial=max(total_gpus, 1),
                             image_size=data.image_size, workload=spec.workload,
                             spatial_dims=data.spatial_dims)
    searched, fixed = resolve_space(spec.space, probe_ctx)
    searched, fixed, pinned = pin(searched, fixed, spec.base)
    base = default_patch({**spec.trial_base(), **fixed}, searched, data)
    check_inputs(spec.num_trials, searched, data)
    workers = domain_values(searched["workers"]) if "workers" in searched else \
        [base.get("workers", 1)]
    plan = resources.plan(total_cpus, total_gpus, cpus_per_trial=spec.cpus_per_trial,
                          max_concurrent=spec.max_concurrent_trials, max_workers=max(workers),
                          worker_cpus=worker_cpus)
    ctx = SpaceContext(use_gpu=plan.use_gpu, cpus_per_trial=plan.cpus_per_trial,
                       gpus_per_trial=max(plan.gpus_per_trial, 1), image_size=data.image_size,
                       workload=spec.workload, spatial_dims=data.spatial_dims)
    check_space(searched, base, ctx)
    warm_start_points(spec.warm_start, searched, base)  # a bad point fails before any trial
    return searched, base, plan, pinned


def describe_space(searched: dict) -> dict[str, Any]:
    return {k: str(v) if not hasattr(v, "categories") else {"choice": list(v.categories)}
            for k, v in searched.items()}


def make_searcher(spec: SearchSpec, objective, searched: dict, base: dict):
    """Optuna through Ray Tune: seeded TPE, or seeded NSGA-II for a Pareto search."""
    from optuna.samplers import NSGAIISampler, TPESampler
    from ray.tune.search.optuna import OptunaSearch

    if isinstance(objective.metric, list):
        sampler = NSGAIISampler(seed=spec.seed, population_size=max(4, spec.num_trials // 3))
    else:
        sampler = TPESampler(seed=spec.seed, n_startup_trials=max(3, spec.num_trials // 4))
    return OptunaSearch(metric=objective.metric, mode=objective.mode, sampler=sampler,
                        seed=spec.seed,
                        points_to_evaluate=warm_start_points(spec.warm_start, searched, base)
                        or None)


STATE_FILE = "search_state.json"
JOURNAL_FILE = "trials.jsonl"


def run_search(spec: SearchSpec, *, out: TextIO = sys.stdout,
               tracker: Tracker | None = None, resume: bool = False) -> SearchResult:
    """Run a whole search and return its result. The CLI is a thin layer over this.

    resume: continue the search in `output_dir/name` whose driver died: finished trials are
    not run again, the Optuna study keeps its history, MLflow runs are continued."""
    import ray
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback
    from ray.tune.schedulers import ASHAScheduler

    from trainables.data.pipeline import to_ray_datasets
    from trainables.trial.trainable import TrialContext, run_trial, trial_resources

    started = time.time()
    objective = spec.make_objective()
    data = load_spec_data(spec)  # bad files fail before Ray
    joining = ray.is_initialized() or bool(os.environ.get("RAY_ADDRESS"))
    if not joining:
        searched, base, plan, pinned = prepare(spec, data, *resources.local_resources())
    started_ray = resources.init_ray()
    try:
        if joining:
            searched, base, plan, pinned = prepare(spec, data, *resources.cluster_resources())
        out_dir = (Path(spec.output_dir) / spec.name).resolve()
        state_path = out_dir / STATE_FILE
        previous = json.loads(state_path.read_text()) if resume else {}
        if not resume and state_path.exists():
            # A fresh search under a used name starts over; the old trial journal would
            # otherwise be read as this search's history.
            (out_dir / JOURNAL_FILE).unlink(missing_ok=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        tracker = tracker or MlflowTracker(spec.resolved_tracking_uri(),
                                           artifact_root=spec.resolved_artifact_root(),
                                           fallback_dir=out_dir)
        print(f"search {spec.name!r}: {spec.num_trials} trials x {spec.epochs} epochs on "
              f"{data.describe()}", file=out)
        print(f"  space: {describe_space(searched)}", file=out)
        if pinned:
            print(f"  {describe_pinned(pinned, spec.base)}", file=out)
        print(f"  {objective.formula}", file=out)
        print(f"  {plan.max_concurrent_trials} trial(s) at a time, {plan.cpus_per_trial} CPUs"
              + (f" and up to {plan.gpus_per_trial} GPUs" if plan.use_gpu else "")
              + " per trial", file=out, flush=True)

        tracker.start_search(
            spec.name,
            params={"objective": objective.formula, "num_trials": spec.num_trials,
                    "epochs": spec.epochs, "data": data.source, "seed": spec.seed},
            artifacts={"spec.yaml": yaml.safe_dump(spec.to_dict(), sort_keys=False),
                       "search_space.json": json.dumps(describe_space(searched), indent=2),
                       "objective.txt": objective.formula + "\n\n" + (objective.__doc__ or "")},
            parent_run_id=previous.get("parent_run_id"),
        )
        state_path.write_text(json.dumps(
            {"spec": {**spec.to_dict(), "output_dir": str(out_dir.parent)},
             "parent_run_id": tracker.parent_run_id, "tracking_uri": tracker.location,
             "finished": False}, indent=2, default=str))
        datasets = to_ray_datasets(data)  # into the object store once; every trial shares it
        ctx = TrialContext(
            base=base, meta=data.meta(), model_builder=spec.resolved_model(),
            n_train=len(data.x_train), cpus_per_trial=plan.cpus_per_trial,
            use_gpu=plan.use_gpu, storage_path=str(out_dir / "train"), objective=objective,
            always_use_worker_group=spec.always_use_worker_group,
            cpus_per_worker=plan.cpus_per_worker, placement=spec.placement,
        )
        trainable = tune.with_resources(
            tune.with_parameters(run_trial, ctx=ctx, datasets=datasets), trial_resources(ctx))
        searcher = make_searcher(spec, objective, searched, base) if searched else None
        scheduler = None
        if spec.early_stopping:
            scheduler = ASHAScheduler(
                metric=objective.metric, mode=objective.mode, time_attr="training_iteration",
                max_t=spec.epochs, grace_period=spec.grace_period,
                reduction_factor=spec.reduction_factor)
        book = TrialBook(tracker, spec.num_trials, spec.epochs, out=out,
                         journal=out_dir / JOURNAL_FILE)
        callbacks = [book, JsonLoggerCallback()]  # result.json per trial, nothing heavier
        if resume:
            # Trials the journal says finished are not re-run, even if Tune's last saved state
            # (every 2 s) still had them running: they report their recorded result.
            finished = {tid: {**rec.metrics, "status": rec.status, "done": True}
                        for tid, rec in book.records.items() if rec.ended is not None}
            trainable = tune.with_resources(
                tune.with_parameters(run_trial, ctx=dataclasses.replace(ctx, finished=finished),
                                     datasets=datasets), trial_resources(ctx))
            tuner = tune.Tuner.restore(str(out_dir), trainable=trainable,
                                       resume_unfinished=True, resume_errored=False)
            # The restored run config carries the dead driver's callbacks (unpickled from
            # tuner.pkl, with no records); hand it this driver's book and tracker instead.
            tuner._local_tuner.get_run_config().callbacks = callbacks
            print(f"  resuming: {len(book.records)} trial(s) already finished", file=out)
            with Interrupts(out) as interrupts:
                tuner.fit()
            if interrupts.interrupted:
                raise close_interrupted(book, tracker, out_dir)
            return _finish(spec, searched, base, book, tracker, objective, out_dir, started)
        tuner = tune.Tuner(
            trainable,
            param_space=searched,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                scheduler=scheduler,
                # metric/mode live on the searcher and scheduler (TuneConfig rejects the lists
                # of a Pareto search); a one-config run has neither and ranks by itself.
                num_samples=spec.num_trials,
                max_concurrent_trials=plan.max_concurrent_trials,
                time_budget_s=spec.time_budget_s,
                # Reuse a finished trial's actor for the next in-process trial: torch, the
                # model code and Ray Data are already imported there.
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=spec.name, storage_path=str(out_dir.parent), verbose=0,
                # In-process trials restart from their last checkpoint after a crash.
                failure_config=tune.FailureConfig(max_failures=2),
                # result.json per trial (what Tune's ResultGrid reads), nothing heavier.
                callbacks=[book, JsonLoggerCallback()],
            ),
        )
        with Interrupts(out) as interrupts:
            tuner.fit()
        if interrupts.interrupted:  # state stays unfinished: `orchestrator resume` continues it
            raise close_interrupted(book, tracker, out_dir)
        return _finish(spec, searched, base, book, tracker, objective, out_dir, started)
    finally:
        if started_ray:
            ray.shutdown()


def _finish(spec, searched, base, book, tracker, objective, out_dir, started) -> SearchResult:
    knobs = list(searched)
    table = trials_table(list(book.records.values()), knobs)
    best = None
    best_config = None
    best_path = None
    if not table.empty and table.iloc[0]["status"] in ("completed", "early_stopped"):
        best = table.iloc[0].to_dict()
        best_rec = book.records[best["trial_id"]]
        best_config = TrialConfig.from_dict({**base, **best_rec.knobs}).to_dict()
        best_path = out_dir / "best_config.json"
        best_path.write_text(json.dumps(
            {"name": spec.name, "data": spec.to_dict()["data"], "config": best_config,
             "objective": objective.formula,
             "metrics": {k: v for k, v in best_rec.metrics.items()}}, indent=2, default=float))
    leaderboard_path = out_dir / "leaderboard.csv"
    table.to_csv(leaderboard_path, index=False)
    pareto_path = out_dir / "pareto.csv"
    front = table[table["pareto"]] if not table.empty else table
    front.to_csv(pareto_path, index=False)
    on_front = set(front["trial_id"]) if not front.empty else set()

    best_id = best["trial_id"] if best else None
    tags = {rid: {"best_trial": str(rid == best_id).lower(),
                  "pareto": str(rid in on_front).lower()}
            for rid in book.records}
    plot_path = out_dir / "pareto.png"
    plot_path.write_bytes(pareto_png(table, best_id, title=f"search {spec.name!r}: "
                                                          "accuracy against training time"))
    artifacts: dict[str, str | bytes] = {"leaderboard.csv": leaderboard_path.read_text(),
                                         "pareto.csv": pareto_path.read_text(),
                                         "pareto.png": plot_path.read_bytes()}
    if best_path:
        artifacts["best_config.json"] = best_path.read_text()
    wall = time.time() - started
    state_path = out_dir / STATE_FILE
    if state_path.exists():
        state_path.write_text(json.dumps({**json.loads(state_path.read_text()),
                                          "finished": True}, indent=2))
    tracker.end_search(artifacts, tags, {"search_wall_s": wall,
                                         "trials": float(len(book.records))}
                       | ({"best_objective": float(best["objective"])} if best else {}))
    return SearchResult(
        name=spec.name, trials=table, best=best, best_config=best_config,
        output_dir=str(out_dir), best_config_path=str(best_path) if best_path else None,
        leaderboard_path=str(leaderboard_path), pareto_path=str(pareto_path),
        tracking_uri=tracker.location,
        experiment_name=spec.name, parent_run_id=tracker.parent_run_id,
        objective_formula=objective.formula, wall_time_s=wall, knobs=knobs,
    )
