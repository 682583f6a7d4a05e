"""Where trials run: starting or joining Ray, and fitting trial concurrency to its resources.

Fair timing: when time is part of the objective, trials must not compete for cores or devices.
On CPU a trial gets `cpus_per_trial` cores (default: all of them, so one trial at a time) and
its workers split them; on GPU every worker gets its own GPU.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

# Ray Train's controller polls its workers every 2 s by default; each trial then waits up to
# 2 s to notice its workers started and again to notice they finished. 0.1 s saves ~4 s a trial.
RAY_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}


@dataclass(frozen=True)
class ResourcePlan:
    use_gpu: bool
    cpus_per_trial: int
    gpus_per_trial: int
    max_concurrent_trials: int


def local_resources() -> tuple[int, int]:
    """(CPUs, GPUs) that a local Ray instance would get: known before Ray starts."""
    import torch

    return os.cpu_count() or 1, torch.cuda.device_count() if torch.cuda.is_available() else 0


def cluster_resources() -> tuple[int, int]:
    import ray

    res = ray.cluster_resources()
    return int(res.get("CPU", 0)), int(res.get("GPU", 0))


def plan(total_cpus: int, total_gpus: int, *, cpus_per_trial: int | None,
         max_concurrent: int | None, max_workers: int = 1) -> ResourcePlan:
    if total_gpus > 0:
        # One GPU per worker; enough GPUs for the widest trial the space can ask for.
        gpus = max(1, min(max_workers, total_gpus))
        concurrent = max(1, total_gpus // gpus)
        cpus = cpus_per_trial or max(1, total_cpus // concurrent)
    else:
        cpus = cpus_per_trial or total_cpus
        if cpus > total_cpus:
            raise ValueError(f"cpus_per_trial {cpus} is more than the {total_cpus} CPUs Ray has")
        gpus, concurrent = 0, max(1, total_cpus // cpus)
    if max_concurrent is not None:
        concurrent = min(concurrent, max_concurrent)
    return ResourcePlan(total_gpus > 0, cpus, gpus, concurrent)


def init_ray() -> bool:
    """Join the Ray cluster named by RAY_ADDRESS (as `ray job submit` sets it) or start a local
    one. Returns True when this call started Ray (and so should shut it down)."""
    import optuna
    import ray
    import ray.data

    # The console shows the search's own one-line-per-epoch progress; Tune's tables and logger
    # callbacks (TensorBoard, CSV, JSON per trial) would repeat it, and cost time per result.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # Save the experiment state (trials, searcher) every 2 s so that a killed driver can be
    # resumed close to where it stopped; the state of a search is a few kB.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    # Ray Data warns "no available CPUs, the Dataset job will hang" whenever a dataset is touched
    # while trials hold every CPU. Ours are materialized before any trial starts and need no
    # CPU tasks afterwards, so the warning is always a false alarm here.
    logging.getLogger("ray.data.dataset").setLevel(logging.ERROR)
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        ray.init(logging_level=logging.WARNING, log_to_driver=False)
        return True
    dashboard = _own_dashboard()
    ray.init(
        # "local" always starts a fresh instance: never silently join a stray `ray start` head
        # (RAY_ADDRESS is the explicit way to join a cluster).
        address="local",
        runtime_env={"env_vars": {**RAY_ENV, **dashboard}},
        dashboard_port=int(dashboard["RAY_API_SERVER_ADDRESS"].rsplit(":", 1)[1]),
        logging_level=logging.WARNING,
        # Worker and Train-controller logs stay in Ray's log folder (session_latest/logs); the
        # console shows the search's own progress, one line per trial epoch.
        log_to_driver=False,
    )
    return True


def _own_dashboard() -> dict[str, str]:
    """Workers' env naming this Ray's own dashboard. Ray Train's placement-group cleaner finds
    the state API by auto-detection, which fails when several local Ray instances share the
    machine: the trial's placement group is then never freed and the next trial waits forever."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {"RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}"}
