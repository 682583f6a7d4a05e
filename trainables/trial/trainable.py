"""One search trial: a Ray Tune function trainable that runs a Ray Train `TorchTrainer`.

This is the Ray 2.60 (Train V2) way of running Train inside Tune: the Tune function builds the
trainer itself, and a callback in the Train RunConfig hands rank 0's `ray.train.report` metrics
back to it for `ray.tune.report` (trainables/trial/reports.py says why not Ray's own
`TuneReportCallback`). The Tune function then holds no CPU of its own; the
trainer's workers do.

A single-worker trial runs the same loop on the same Ray Data pipeline in the Tune trial process
instead (`in_process`): a worker group of one buys nothing but ~10 s of start-up and teardown.
Its Tune actor then holds the trial's CPUs (`trial_resources`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.trial.attempts import fit_group
from trainables.trial.resources import ResourcePlan


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a search shares, handed over once with `tune.with_parameters`."""

    base: dict[str, Any]
    """Fixed trial settings; the sampled knobs are laid over them."""
    meta: DataMeta
    n_train: int
    resources: ResourcePlan
    """What the trial and each of its workers ask Ray for."""
    storage_path: str
    task: Any = None
    """What is trained (trainables/loop/task.py): your task, or your model with the built-in
    rest; None: the config's built-in workload."""
    always_use_worker_group: bool = False
    """Run single-worker trials through a TorchTrainer too (slower start, same training)."""
    objective: Callable[[dict, dict], dict] | None = None
    """Adds the objective value(s) to each reported metrics dict (runs in the Train controller)."""
    placement: str = "PACK"
    """Ray placement strategy of a trial's workers: 'PACK' (as few nodes as possible) or
    'SPREAD' (one per node where it can)."""
    profile: tuple[str, ...] = ()
    """Speed-only switches each trial picks by timing a few steps first
    (`trainables.loop.profile.switches_to_profile`); empty: no profile."""
    measure_noise: bool = False
    """Measure the trained model's gradient noise scale after the last epoch (the baseline does,
    for the search's predictions: trainables/loop/noise.py)."""
    time_start: bool = False
    """Time the trial's own step before its first epoch and report it (`start_step_s`): a
    confirmation's prediction, re-timed in the process that trains it."""
    ledger: Any = None
    """The search's Ledger actor (trainables/trial/ledger.py): a configuration already run
    reports its recorded result instead of training; None trains every trial."""
    start_from: str | None = None
    """A checkpoint each trial goes on from where it shares its first epochs (the measured
    run: the race's winner's, orchestrator/measure.py); None trains from scratch."""


def trial_config(ctx: TrialContext, sampled: dict[str, Any]) -> TrialConfig:
    return TrialConfig.from_dict({**ctx.base, **sampled})


def trial_profile(ctx: TrialContext, sampled: dict[str, Any]) -> tuple[str, ...]:
    """The switches this trial times at its start: the context's, but for one its own settings
    name (a screened candidate's timed value is its value, not the profile's)."""
    return tuple(switch for switch in ctx.profile if switch not in sampled)


def in_process(ctx: TrialContext, cfg: TrialConfig) -> bool:
    return cfg.workers == 1 and not ctx.always_use_worker_group


def reuse_actors(workers: list[int], always_use_worker_group: bool) -> bool:
    """Reuse a finished trial's actor only when every trial trains in it (one worker): torch,
    the model code and Ray Data are then already imported there. A worker-group trial's actor
    holds a token resource and imports nothing heavy, so reuse buys nothing, and it races the
    previous trial's worker-group teardown."""
    return max(workers) == 1 and not always_use_worker_group


def trial_resources(ctx: TrialContext) -> Callable[[dict], Any]:
    """Tune resources of a trial's own actor: the trial's CPUs (and GPU) when it trains in
    process, else a token (its TorchTrainer's workers reserve the real resources)."""
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    def resources(sampled: dict) -> PlacementGroupFactory:
        plan = ctx.resources
        in_actor = in_process(ctx, trial_config(ctx, sampled))
        return PlacementGroupFactory([plan.in_process() if in_actor else plan.token()])

    return resources


def run_trial(sampled: dict[str, Any], ctx: TrialContext, datasets: dict) -> None:
    import ray.tune

    from trainables.status import status_of
    from trainables.trial.worker import TrialPlan, run_in_tune

    cfg = trial_config(ctx, sampled)
    if ctx.ledger is not None:
        from trainables.identity import ledger_key
        from trainables.trial.ledger import duplicate_report, recorded_result

        trial_id = ray.tune.get_context().get_trial_id()
        recorded = recorded_result(ctx.ledger, ledger_key(sampled, cfg.seed), trial_id)
        if recorded is not None:
            ray.tune.report(duplicate_report(recorded))
            return
    plan = TrialPlan(cfg=cfg, meta=ctx.meta, n_train=ctx.n_train,
                     threads=ctx.resources.threads(cfg.workers),
                     task=ctx.task, profile=trial_profile(ctx, sampled),
                     measure_noise=ctx.measure_noise, time_start=ctx.time_start,
                     start_from=ctx.start_from)
    if not in_process(ctx, cfg):
        _in_group(ctx, cfg, plan, datasets)
        return
    try:
        run_in_tune(plan, datasets, ctx.objective, ctx.resources.use_gpu)
    except Exception as err:
        outcome = status_of(err)
        if outcome.retry:
            raise  # a lost process: Tune's FailureConfig restarts from the checkpoint
        _report_outcome(ctx, cfg, outcome)


def _in_group(ctx: TrialContext, cfg: TrialConfig, plan, datasets: dict) -> None:
    """The trial as a Ray Train worker group of `cfg.workers`, its rank 0's reports forwarded
    to Tune."""
    import ray.train
    import ray.tune
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from trainables.data.pipeline import data_config, group_datasets
    from trainables.trial.reports import ObjectiveReport, forward_reports
    from trainables.trial.worker import train_loop_per_worker

    use_gpu = ctx.resources.use_gpu
    # On this trial's own node: placed on a worker node that is lost, the queue would take the
    # trial's reports with it while its workers restart elsewhere.
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    reports = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
    taken = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
    group_data, loop_data = group_datasets(datasets, cfg.workers)
    make_trainer = lambda: TorchTrainer(  # noqa: E731 - a fresh trainer per attempt
        train_loop_per_worker,
        train_loop_config={"plan": plan, **loop_data},
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(
            num_workers=cfg.workers, use_gpu=use_gpu,
            resources_per_worker=ctx.resources.worker(cfg.workers),
            placement_strategy=ctx.placement,
        ),
        # Shares cut by the driver, or a fixed split by Ray Train (a seed fixes the sample order);
        # only training data is sharded: rank 0 scores the whole validation set.
        datasets=group_data, dataset_config=data_config(),
        run_config=ray.train.RunConfig(
            name=ray.tune.get_context().get_trial_name(),
            storage_path=ctx.storage_path,
            callbacks=[ObjectiveReport(reports, ctx.objective, taken)],
            # No retries by Train: it would retry deterministic failures too (fit_group retries
            # only lost workers or nodes).
            failure_config=ray.train.FailureConfig(max_failures=0),
            # Only the latest checkpoint is ever resumed from, or gone on from: the group waits
            # for Tune to take each report (trainables/trial/reports.py), so it is the one
            # Tune last saw.
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=1),
        ),
    )
    try:
        outcome = forward_reports(lambda: fit_group(make_trainer), reports, ray.tune.report,
                                  taken)
    finally:
        # `taken` is left to end with this actor: a group stopped mid-report waits on it until
        # then, and does not go on to replace the checkpoint Tune stopped it at.
        reports.shutdown(force=True)
    if outcome is not None:
        _report_outcome(ctx, cfg, outcome)


def _report_outcome(ctx: TrialContext, cfg: TrialConfig, outcome) -> None:
    """A trial that ended with an error reports it as its final result (status and reason),
    through the objective like any other result, instead of raising into Tune."""
    import ray.tune

    from trainables.loop.state import outcome_metrics

    metrics = outcome_metrics(cfg, outcome)
    ray.tune.report(ctx.objective(metrics, {}) if ctx.objective else metrics)
