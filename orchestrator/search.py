"""The search driver: validate -> load data once -> Ray Tune + Optuna over Ray Train trials ->
leaderboard, best config, MLflow records.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import yaml

from orchestrator import resources
from orchestrator.result import SearchResult, trials_table
from orchestrator.spec import SearchSpec
from orchestrator.tracking import MlflowTracker, Tracker
from orchestrator.trial_book import TrialBook
from search_spaces import SpaceContext, check_space, domain_values, resolve_space
from trainables.config import TrialConfig
from trainables.datasets import ArrayData, load_data
from trainables.models import DataMeta


def prepare(spec: SearchSpec, data: ArrayData, total_cpus: int, total_gpus: int,
            worker_cpus: int | None = None):
    """Resolve and check the space against the hardware and data: every error before any trial."""
    probe_ctx = SpaceContext(use_gpu=total_gpus > 0, cpus_per_trial=spec.cpus_per_trial or
                             total_cpus, gpus_per_trial=max(total_gpus, 1),
                             image_size=data.image_size)
    searched, fixed = resolve_space(spec.space, probe_ctx)
    base = {**spec.trial_base(), **fixed}
    workers = domain_values(searched["workers"]) if "workers" in searched else \
        [base.get("workers", 1)]
    plan = resources.plan(total_cpus, total_gpus, cpus_per_trial=spec.cpus_per_trial,
                          max_concurrent=spec.max_concurrent_trials, max_workers=max(workers),
                          worker_cpus=worker_cpus)
    ctx = SpaceContext(use_gpu=plan.use_gpu, cpus_per_trial=plan.cpus_per_trial,
                       gpus_per_trial=max(plan.gpus_per_trial, 1), image_size=data.image_size)
    check_space(searched, base, ctx)
    return searched, base, plan


def describe_space(searched: dict) -> dict[str, Any]:
    return {k: str(v) if not hasattr(v, "categories") else {"choice": list(v.categories)}
            for k, v in searched.items()}


def run_search(spec: SearchSpec, *, out: TextIO = sys.stdout,
               tracker: Tracker | None = None) -> SearchResult:
    """Run a whole search and return its result. The CLI is a thin layer over this."""
    import ray
    from optuna.samplers import TPESampler
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback
    from ray.tune.search.optuna import OptunaSearch

    from trainables.pipeline import to_ray_datasets
    from trainables.trial import TrialContext, run_trial

    started = time.time()
    objective = spec.make_objective()
    data = load_data(spec.data)  # a bad file fails here, before Ray starts
    joining = ray.is_initialized() or bool(os.environ.get("RAY_ADDRESS"))
    if not joining:
        searched, base, plan = prepare(spec, data, *resources.local_resources())
    started_ray = resources.init_ray()
    try:
        if joining:
            searched, base, plan = prepare(spec, data, *resources.cluster_resources())
        out_dir = (Path(spec.output_dir) / spec.name).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        tracker = tracker or MlflowTracker(spec.resolved_tracking_uri(),
                                           artifact_root=spec.resolved_artifact_root())
        print(f"search {spec.name!r}: {spec.num_trials} trials x {spec.epochs} epochs on "
              f"{data.describe()}", file=out)
        print(f"  space: {describe_space(searched)}", file=out)
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
        )
        datasets = to_ray_datasets(data)  # into the object store once; every trial shares it
        ctx = TrialContext(
            base=base, meta=DataMeta(data.in_channels, data.num_classes),
            n_train=len(data.x_train), cpus_per_trial=plan.cpus_per_trial,
            use_gpu=plan.use_gpu, storage_path=str(out_dir / "train"), objective=objective,
            cpus_per_worker=plan.cpus_per_worker, placement=spec.placement,
        )
        trainable = tune.with_resources(
            tune.with_parameters(run_trial, ctx=ctx, datasets=datasets),
            # The Tune function only waits on its TorchTrainer, whose workers hold the CPUs;
            # {"cpu": 0} alone is rejected, hence the token memory request.
            {"cpu": 0, "memory": 1},
        )
        searcher = None
        if searched:
            sampler = TPESampler(seed=spec.seed, n_startup_trials=max(3, spec.num_trials // 4))
            searcher = OptunaSearch(metric=objective.metric, mode=objective.mode,
                                    sampler=sampler, seed=spec.seed)
        book = TrialBook(tracker, spec.num_trials, spec.epochs, out=out)
        tuner = tune.Tuner(
            trainable,
            param_space=searched,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                metric=None if searcher else objective.metric,
                mode=None if searcher else objective.mode,
                num_samples=spec.num_trials,
                max_concurrent_trials=plan.max_concurrent_trials,
                time_budget_s=spec.time_budget_s,
            ),
            run_config=tune.RunConfig(
                name=spec.name, storage_path=str(out_dir.parent), verbose=0,
                # result.json per trial (what Tune's ResultGrid reads), nothing heavier.
                callbacks=[book, JsonLoggerCallback()],
            ),
        )
        tuner.fit()
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
            {"name": spec.name, "data": spec.data, "config": best_config,
             "objective": objective.formula,
             "metrics": {k: v for k, v in best_rec.metrics.items()}}, indent=2, default=float))
    leaderboard_path = out_dir / "leaderboard.csv"
    table.to_csv(leaderboard_path, index=False)

    tags = {rid: {"best_trial": str(best is not None and rid == best["trial_id"]).lower()}
            for rid in book.records}
    artifacts = {"leaderboard.csv": leaderboard_path.read_text()}
    if best_path:
        artifacts["best_config.json"] = best_path.read_text()
    wall = time.time() - started
    tracker.end_search(artifacts, tags, {"search_wall_s": wall,
                                         "trials": float(len(book.records))}
                       | ({"best_objective": float(best["objective"])} if best else {}))
    return SearchResult(
        name=spec.name, trials=table, best=best, best_config=best_config,
        output_dir=str(out_dir), best_config_path=str(best_path) if best_path else None,
        leaderboard_path=str(leaderboard_path), tracking_uri=tracker.location,
        experiment_name=spec.name, parent_run_id=tracker.parent_run_id,
        objective_formula=objective.formula, wall_time_s=wall, knobs=knobs,
    )
