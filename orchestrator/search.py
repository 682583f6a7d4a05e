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
from orchestrator.folder import SearchFolder, portable_spec
from orchestrator.history import seeded_storage
from orchestrator.baseline import run_baseline, with_baseline
from orchestrator.importance import importance_artifacts, importance_lines, knob_importance
from orchestrator.interrupt import Interrupts, close_interrupted
from orchestrator.pareto import pareto_png
from orchestrator.report import add_baseline_row, headline
from orchestrator.stopper import target_stopper
from orchestrator.result import SearchResult, trials_table
from orchestrator.spec import SearchSpec
from orchestrator.tracking import MlflowTracker, Tracker
from orchestrator.tracking.datasets import dataset_record
from orchestrator.trial_book import TrialBook
from search_spaces import SpaceContext, check_space, domain_values, resolve_space
from search_spaces.steps import fit_batch_to_shards
from search_spaces.inputs import check_inputs, default_patch
from search_spaces.pin import describe_pinned, pin
from search_spaces.warm_start import warm_start_points
from trainables.config import TrialConfig
from trainables.data.arrays import ArrayData, with_spatial_dims
from trainables.loop.profile import PROFILED, switches_to_profile
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
    workers = _workers(searched, base)
    plan = resources.plan(total_cpus, total_gpus, cpus_per_trial=spec.cpus_per_trial,
                          max_concurrent=spec.max_concurrent_trials, max_workers=max(workers),
                          worker_cpus=worker_cpus)
    ctx = SpaceContext(use_gpu=plan.use_gpu, cpus_per_trial=plan.cpus_per_trial,
                       gpus_per_trial=max(plan.gpus_per_trial, 1), image_size=data.image_size,
                       workload=spec.workload, spatial_dims=data.spatial_dims)
    check_space(searched, base, ctx)
    # Batch sizes that would train 0 steps: dropped with a note, or refused (search_spaces.steps).
    searched = fit_batch_to_shards(searched, base, len(data.x_train),
                                   note=lambda line: print(line, file=sys.stderr))
    warm_start_points(spec.warm_start, searched, base)  # a bad point fails before any trial
    return searched, base, plan, pinned


def print_space(searched: dict, pinned, spec: SearchSpec, out: TextIO, base: dict,
                use_gpu: bool) -> None:
    """The header's space lines, the same for a search and for `search --check`."""
    print(f"  space: {describe_space(searched)}", file=out)
    if pinned:
        print(f"  {describe_pinned(pinned, spec.base)}", file=out)
    print(f"  {describe_profile(spec, searched, base, use_gpu)}", file=out)


def profile_switches(spec: SearchSpec, searched: dict, base: dict) -> tuple[str, ...]:
    """What each trial profiles: a switch the user pinned (`--set`, `base`) or the space
    searches keeps the user's value and is not profiled."""
    return switches_to_profile(spec.profile, set(spec.base) | set(searched), base)


def describe_profile(spec: SearchSpec, searched: dict, base: dict, use_gpu: bool) -> str:
    if spec.profile == "off":
        return "profile: off (speed-only switches as configured)"
    if base.get("loop") == "legacy" and "loop" not in searched:
        return "profile: none (the legacy loop keeps its habits)"
    # cuDNN's algorithm search exists only on a GPU: a CPU trial never times it.
    switches = [s for s in profile_switches(spec, searched, base)
                if use_gpu or s != "cudnn_benchmark"]
    line = (f"profile: {', '.join(switches) or 'nothing'} picked by timing a few steps at "
            "each trial's start (where the data has a channels-last layout)" if switches else
            "profile: nothing to time here")
    kept = [s for s in PROFILED if s in spec.base or s in searched]
    return line + (f"; not profiled, your value wins: {', '.join(kept)}" if kept else "")


def _workers(searched: dict, base: dict) -> list[int]:
    """Every worker count a trial of this search may have."""
    if "workers" in searched:
        return list(domain_values(searched["workers"]))
    return [base.get("workers", 1)]


def describe_space(searched: dict) -> dict[str, Any]:
    return {k: str(v) if not hasattr(v, "categories") else {"choice": list(v.categories)}
            for k, v in searched.items()}


def make_searcher(spec: SearchSpec, objective, searched: dict, base: dict, history=()):
    """Optuna through Ray Tune: seeded TPE, or seeded NSGA-II for a Pareto search.

    history: trial records of a resumed search; the study starts with them (see `history`)."""
    from optuna.samplers import NSGAIISampler, TPESampler

    from orchestrator.searcher import TruthfulOptunaSearch

    # A resumed search's sampler must not replay the dead driver's random draws (the same seed
    # would propose its first configurations again): offset the seed by the history it holds.
    seed = spec.seed + len(history)
    if isinstance(objective.metric, list):
        sampler = NSGAIISampler(seed=seed, population_size=max(4, spec.num_trials // 3))
    else:
        sampler = TPESampler(seed=seed, n_startup_trials=max(3, spec.num_trials // 4))
    ran = [rec.knobs for rec in history]
    points = [p for p in warm_start_points(spec.warm_start, searched, base)
              if not any(p.items() <= knobs.items() for knobs in ran)]
    seeded = {}
    if history:
        seeded = {"study_name": spec.name,
                  "storage": seeded_storage(history, searched, objective.metric, objective.mode,
                                            spec.name)}
    # The seed lives in the sampler (OptunaSearch ignores its own `seed` next to a sampler).
    return TruthfulOptunaSearch(metric=objective.metric, mode=objective.mode, sampler=sampler,
                                points_to_evaluate=points or None, **seeded)


def run_search(spec: SearchSpec, *, out: TextIO = sys.stdout,
               tracker: Tracker | None = None, resume: bool = False) -> SearchResult:
    """Run a whole search and return its result. The CLI is a thin layer over this.

    resume: continue the search in `output_dir/name` whose driver died. Trials its journal says
    finished are kept and not run again; trials the death cut short are discarded (their
    partial MLflow runs deleted) and new trials take their places; the Optuna study starts
    from the finished trials; MLflow records the dead driver had not written are written."""
    import ray

    from trainables.data.pipeline import to_ray_datasets
    from trainables.trial.ledger import start_ledger
    from trainables.trial.trainable import TrialContext

    started = time.time()
    objective = spec.make_objective()
    data = load_spec_data(spec)  # bad files fail before Ray
    joining = ray.is_initialized() or bool(os.environ.get("RAY_ADDRESS"))
    if not joining:
        searched, base, plan, pinned = prepare(spec, data, *resources.local_resources())
    started_ray = resources.init_ray()
    ledger = None
    try:
        if joining:
            searched, base, plan, pinned = prepare(spec, data, *resources.cluster_resources())
        folder = SearchFolder.of(spec.output_dir, spec.name)
        previous = folder.read_state() if resume else {}
        if not resume:
            folder.start_fresh()
        # The baseline runs first, outside num_trials; the objective then knows its score/time.
        baseline = run_baseline(spec, base, folder.root, out, run_search, resume=resume)
        objective = with_baseline(objective, baseline)
        tracker = tracker or MlflowTracker(spec.resolved_tracking_uri(),
                                           artifact_root=spec.resolved_artifact_root(),
                                           fallback_dir=folder.root, outbox_file=folder.outbox)
        ledger = None if spec.rerun_duplicates else start_ledger()
        book = TrialBook(tracker, spec.num_trials, spec.epochs, out=out, journal=folder.journal,
                         base=base, ledger=ledger,
                         seed=base.get("seed", spec.seed))
        to_run = max(0, spec.num_trials - len(book.records))
        print(f"search {spec.name!r}: {spec.num_trials} trials x {spec.epochs} epochs on "
              f"{data.describe()}", file=out)
        print_space(searched, pinned, spec, out, base, plan.use_gpu)
        print(f"  {objective.formula}", file=out)
        print(f"  {plan.max_concurrent_trials} trial(s) at a time, {plan.cpus_per_trial} CPUs"
              + (f" and up to {plan.gpus_per_trial} GPUs" if plan.use_gpu else "")
              + " per trial", file=out, flush=True)
        if resume:
            print(f"  resuming: {len(book.records)} trial(s) already finished, "
                  f"{len(book.cut_short)} cut short by the stop (discarded, run again), "
                  f"{to_run} to run", file=out, flush=True)

        tracker.start_search(
            spec.name,
            params={"objective": objective.formula, "num_trials": spec.num_trials,
                    "epochs": spec.epochs, "data": data.source, "seed": spec.seed},
            artifacts={"spec.yaml": yaml.safe_dump(spec.to_dict(), sort_keys=False),
                       "search_space.json": json.dumps(describe_space(searched), indent=2),
                       "objective.txt": objective.formula + "\n\n" + (objective.__doc__ or "")},
            parent_run_id=previous.get("parent_run_id"),
            dataset=dataset_record(data),
        )
        book.discard_cut_short()
        folder.write_state(spec=portable_spec(spec.to_dict(), folder.root.parent),
                           parent_run_id=tracker.parent_run_id, tracking_uri=tracker.location,
                           finished=False)
        if to_run:
            datasets = to_ray_datasets(data)  # into the object store once; trials share it
            ctx = TrialContext(
                base=base, meta=data.meta(), model_builder=spec.resolved_model(),
                n_train=len(data.x_train), cpus_per_trial=plan.cpus_per_trial,
                use_gpu=plan.use_gpu, storage_path=str(folder.train_storage),
                objective=objective, always_use_worker_group=spec.always_use_worker_group,
                cpus_per_worker=plan.cpus_per_worker, placement=spec.placement,
                ledger=book.ledger, profile=profile_switches(spec, searched, base),
            )
            tuner = _tuner(spec, ctx, datasets, searched, base, objective, plan, book, to_run,
                           folder)
            with Interrupts(out) as interrupts:
                tuner.fit()
            if interrupts.interrupted:  # state stays unfinished: `orchestrator resume` goes on
                raise close_interrupted(book, tracker, folder.root)
        return _finish(spec, searched, base, book, tracker, objective, folder, started,
                       baseline)
    finally:
        if ledger is not None:  # one per search: a long-lived session (a notebook) keeps none
            ray.kill(ledger)
        if started_ray:
            ray.shutdown()


def _tuner(spec, ctx, datasets, searched, base, objective, plan, book, num_samples, folder):
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback
    from ray.tune.schedulers import ASHAScheduler

    from trainables.trial.trainable import reuse_actors, run_trial, trial_resources

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, ctx=ctx, datasets=datasets), trial_resources(ctx))
    history = list(book.records.values())
    searcher = make_searcher(spec, objective, searched, base, history) if searched else None
    scheduler = None
    if spec.early_stopping:
        scheduler = ASHAScheduler(
            metric=objective.metric, mode=objective.mode, time_attr="training_iteration",
            max_t=spec.epochs, grace_period=spec.grace_period,
            reduction_factor=spec.reduction_factor)
    stopper = target_stopper(objective)
    if stopper is not None:
        book.stop_reasons = stopper.stopped
    return tune.Tuner(
        trainable,
        param_space=searched,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=scheduler,
            # metric/mode live on the searcher and scheduler (TuneConfig rejects the lists
            # of a Pareto search); a one-config run has neither and ranks by itself.
            num_samples=num_samples,
            max_concurrent_trials=plan.max_concurrent_trials,
            time_budget_s=spec.time_budget_s,
            # Only where every trial trains in its own actor (see reuse_actors).
            reuse_actors=reuse_actors(_workers(searched, base), spec.always_use_worker_group),
        ),
        run_config=tune.RunConfig(
            name=spec.name, storage_path=str(folder.root.parent), verbose=0,
            # In-process trials restart from their last checkpoint after a crash.
            # Only a lost trial process reaches Tune as an error: every other failure is
            # reported as the trial's status (run_trial), so this retries nothing else.
            failure_config=tune.FailureConfig(max_failures=2),
            # One checkpoint per in-process trial is all a restart resumes from.
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            # result.json per trial (what Tune's ResultGrid reads), nothing heavier.
            callbacks=[book, JsonLoggerCallback()],
            stop=stopper,
        ),
    )


def _finish(spec, searched, base, book, tracker, objective, folder, started,
            baseline=None) -> SearchResult:
    # Tune's on_experiment_end settled every trial it created; this closes any record an
    # interrupted driver left open, so no row says `running` after the search.
    book.end_open_trials_as("pruned", "stopped by the search before its end")
    print(book.summary(), file=book.out, flush=True)
    knobs = list(searched)
    table = trials_table(list(book.records.values()), knobs)
    best = None
    best_config = None
    best_path = None
    if not table.empty and table.iloc[0]["status"] in ("completed", "early_stopped"):
        best = table.iloc[0].to_dict()
        best_rec = book.records[best["trial_id"]]
        # With the profile's picks: what the best trial trained with.
        best_config = TrialConfig.from_dict({**base, **best_rec.knobs,
                                             **best_rec.picks}).to_dict()
        best_path = folder.best_config
        best_path.write_text(json.dumps(
            # spec.to_dict(): in-memory data (arrays) becomes its description, not a JSON dump.
            {"name": spec.name, "data": spec.to_dict()["data"], "config": best_config,
             "objective": objective.formula,
             "metrics": {k: v for k, v in best_rec.metrics.items()}}, indent=2, default=float))
    table = add_baseline_row(table, baseline, knobs)
    leaderboard_path = folder.leaderboard
    table.to_csv(leaderboard_path, index=False)
    pareto_path = folder.pareto_csv
    front = table[table["pareto"] == True] if not table.empty else table  # noqa: E712
    front.to_csv(pareto_path, index=False)
    on_front = set(front["trial_id"]) if not front.empty else set()

    best_id = best["trial_id"] if best else None
    tags = {rid: {"best_trial": str(rid == best_id).lower(),
                  "pareto": str(rid in on_front).lower()}
            for rid in book.records}
    plot_path = folder.pareto_png
    plot_path.write_bytes(pareto_png(table, best_id, title=f"search {spec.name!r}: "
                                                          "accuracy against training time"))
    artifacts: dict[str, str | bytes] = {"leaderboard.csv": leaderboard_path.read_text(),
                                         "pareto.csv": pareto_path.read_text(),
                                         "pareto.png": plot_path.read_bytes()}
    if best_path:
        artifacts["best_config.json"] = best_path.read_text()
    importance = knob_importance(table, knobs, objective)
    artifacts.update(importance_artifacts(importance))
    if baseline:
        artifacts["baseline.json"] = json.dumps(baseline, indent=2, default=str)
    wall = time.time() - started
    notes = importance_lines(importance) + headline(best, baseline, objective.baseline_s, wall)
    tracker.end_search(artifacts, tags, {"search_wall_s": wall,
                                         "trials": float(len(book.records))}
                       | ({"best_objective": float(best["objective"])} if best else {}))
    # Only now: a search stopped before this point stays resumable.
    folder.write_state(finished=True, parent_run_id=tracker.parent_run_id)
    return SearchResult(
        name=spec.name, trials=table, best=best, best_config=best_config,
        output_dir=str(folder.root), best_config_path=str(best_path) if best_path else None,
        leaderboard_path=str(leaderboard_path), pareto_path=str(pareto_path),
        tracking_uri=tracker.location,
        experiment_name=spec.name, parent_run_id=tracker.parent_run_id,
        objective_formula=objective.formula, wall_time_s=wall, knobs=knobs,
        baseline=baseline, notes=notes,
    )
