"""Timing configurations for a few steps each, on the search's Ray, without training them.

What the screen does for every candidate (orchestrator/screen/), and a baseline taken from
history for its own configuration (orchestrator/history_baseline.py): each worker count is one
Ray job, one-worker configurations in a Ray task holding a trial's resources (a streaming task:
each result comes back as it is timed), wider ones in a TorchTrainer worker group of that width
(its start-up paid once). A group that fails marks its configurations with its status. The
timing itself is trainables/trial/screen.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainables.status import status_of


def run_screen(configs: list[dict[str, Any]], *, meta, n_train: int, datasets: dict,
               plan, task, progress: Callable[[int], None] = lambda n: None
               ) -> list[dict]:
    """Time `configs` (grouped by worker count); one result per config, in order.
    `progress(n)`: n more configs are timed (one at a time in one process; a worker group's
    all at once)."""
    from trainables.trial.screen import ScreenPlan

    by_workers: dict[int, list[dict]] = {}
    for cfg in configs:
        by_workers.setdefault(int(cfg.get("workers", 1)), []).append(cfg)
    results: dict[int, dict] = {}
    for workers, group in sorted(by_workers.items()):
        screen_plan = ScreenPlan(candidates=group, meta=meta, n_train=n_train,
                                 threads=plan.threads(workers), task=task)
        counted = [0]

        def tick(n: int) -> None:
            counted[0] += n
            progress(n)

        try:
            found = _in_process(screen_plan, datasets, plan, tick) if workers == 1 else \
                _in_group(screen_plan, datasets, plan, workers)
        except Exception as err:  # noqa: BLE001 - the group's end is its candidates' result
            outcome = status_of(err)
            found = [{"config": c, "status": str(outcome.status), "reason": outcome.reason}
                     for c in group]
        progress(len(group) - counted[0])  # a worker group's, or what a lost task left
        for cfg, result in zip(group, found):
            results[id(cfg)] = result
    return [results[id(cfg)] for cfg in configs]


def _in_process(screen_plan, datasets: dict, plan, progress: Callable[[int], None]
                ) -> list[dict]:
    import ray

    from trainables.trial.screen import screen_in_process

    bundle = plan.in_process()
    # A streaming task: each result comes back as it is timed, so progress shows as it goes.
    task = ray.remote(screen_in_process).options(
        num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0), max_retries=0,
        num_returns="streaming")
    found = []
    for ref in task.remote(screen_plan, datasets, plan.use_gpu):
        found.append(ray.get(ref))
        progress(1)
    return found


def _in_group(screen_plan, datasets: dict, plan, workers: int) -> list[dict]:
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    from trainables.data.pipeline import data_config, group_datasets
    from trainables.trial.screen import screen_loop_per_worker

    group_data, loop_data = group_datasets(datasets, workers)
    trainer = TorchTrainer(
        screen_loop_per_worker, train_loop_config={"plan": screen_plan, **loop_data},
        torch_config=TorchConfig(backend="nccl" if plan.use_gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(num_workers=workers, use_gpu=plan.use_gpu,
                                               resources_per_worker=plan.worker(workers)),
        datasets=group_data, dataset_config=data_config(),
        run_config=ray.train.RunConfig(failure_config=ray.train.FailureConfig(max_failures=0)))
    return trainer.fit().return_value
