"""Where trials run: starting or joining Ray, and sizing trials to its resources (the
`ResourcePlan` of trainables/trial/resources.py, which every trial and worker reads its sizes from).

Fair timing: when time is part of the objective, trials must not compete for cores or devices.
On CPU a trial gets `cpus_per_trial` cores (default: all cores of one machine, so one trial at a
time locally, one per node on a cluster) and its workers split them; on GPU every worker gets its
own GPU and the CPUs beside it.

On a cluster the plan is fitted to what is free when the search starts (other jobs may hold
resources) and to the shape of the nodes: one worker's CPUs must fit on one node.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace

from orchestrator.ray_token import private_token
from trainables.trial.resources import ResourcePlan

logger = logging.getLogger(__name__)

# Ray Train's controller polls its workers every 2 s by default; each trial then waits up to
# 2 s to notice its workers started and again to notice they finished. 0.1 s saves ~4 s a trial.
RAY_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}
# ...and on a Ray this machine starts, it watches no node for preemption: its one node is this
# machine, which no cloud drains. The watcher is an actor of its own per worker group; not
# starting it saves ~1 s of a 2-worker trial's ~13 s here (a cluster keeps it; docs/benchmarks.md).
LOCAL_RAY_ENV = {**RAY_ENV, "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


def local_resources() -> tuple[int, int, int]:
    """(CPUs, GPUs, CPUs one worker can hold) of a local Ray instance: known before Ray starts."""
    import torch

    cpus = ray_cpu_count()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return cpus, gpus, max(1, cpus // gpus) if gpus else cpus


def ray_cpu_count() -> int:
    """The CPUs a local Ray will advertise: Ray's own count, which follows the container's CPU
    quota (cgroups) where `os.cpu_count()` sees every core of the host. Planning on the host's
    cores would ask for CPUs Ray never has, and no trial would start."""
    try:
        from ray._private.utils import get_num_cpus  # what ray.init uses for a local node
    except ImportError:  # moved in a later Ray: fall back on the cores this process may use
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, int(get_num_cpus(override_docker_cpu_warning=True)))


def worker_cpu_limit(nodes: list[dict[str, float]]) -> int:
    """The most CPUs one trial worker can hold, from each node's total resources.

    Without GPUs: the biggest node's CPUs. With GPUs: the CPUs per GPU on the GPU node that has
    the fewest (a CPU-only head's cores are no use to a GPU worker).
    """
    gpu_nodes = [n for n in nodes if n.get("GPU", 0) >= 1]
    if gpu_nodes:
        return max(1, min(int(n.get("CPU", 0) // n["GPU"]) for n in gpu_nodes))
    return max([int(n.get("CPU", 0)) for n in nodes] + [1])


def cluster_resources(settle_s: float = 3.0) -> tuple[int, int, int]:
    """(free CPUs, free GPUs, CPUs one worker can hold) of the Ray cluster this process joined.

    Free, not total: on a shared cluster other jobs may hold some. A search that just ended in
    the same cluster releases its placement groups asynchronously, so wait up to `settle_s` for
    the free resources to reach the totals before settling for what is free.
    """
    import ray

    total = ray.cluster_resources()
    deadline = time.monotonic() + settle_s
    while True:
        free = ray.available_resources()
        if all(free.get(k, 0) >= total.get(k, 0) for k in ("CPU", "GPU")) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    gpus = int(free.get("GPU", 0))
    cpus = int(free.get("CPU", 0))
    if gpus == 0:  # no free GPU: CPU workers may use any node's cores
        nodes = [{k: v for k, v in n.items() if k != "GPU"} for n in nodes]
    return max(cpus, 1), gpus, worker_cpu_limit(nodes)


def plan(total_cpus: int, total_gpus: int, *, cpus_per_trial: int | None,
         max_concurrent: int | None, max_workers: int = 1,
         worker_cpus: int | None = None) -> ResourcePlan:
    """Size one trial and the number of trials at once.

    `worker_cpus` is the most CPUs one worker can hold (one node's, see `worker_cpu_limit`);
    None means one machine holds everything.
    """
    if total_gpus > 0:
        # One GPU per worker; enough GPUs for the widest trial the space can ask for.
        gpus = max(1, min(max_workers, total_gpus))
        concurrent = max(1, total_gpus // gpus)
        per_gpu = max(1, min(total_cpus // (concurrent * gpus), worker_cpus or total_cpus))
        cpus = cpus_per_trial or per_gpu * gpus
        return _capped(ResourcePlan(True, cpus, gpus, concurrent, cpus / gpus), max_concurrent)
    cpus = cpus_per_trial or min(total_cpus, worker_cpus or total_cpus)
    if cpus > total_cpus:
        raise ValueError(f"cpus_per_trial {cpus} is more than the {total_cpus} CPUs Ray has free")
    if worker_cpus and cpus / max(1, max_workers) > worker_cpus:
        raise ValueError(
            f"cpus_per_trial {cpus} split over {max_workers} worker(s) needs more CPUs per worker"
            f" than the largest node has ({worker_cpus}); lower cpus_per_trial or add workers")
    return _capped(ResourcePlan(False, cpus, 0, max(1, total_cpus // cpus)), max_concurrent)


def _capped(p: ResourcePlan, max_concurrent: int | None) -> ResourcePlan:
    if max_concurrent is None or max_concurrent >= p.max_concurrent_trials:
        return p
    return replace(p, max_concurrent_trials=max_concurrent)


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
    # ...and an in-process trial's checkpoint each epoch forces one too (num_to_keep=1): a few kB,
    # not the "bottleneck" Tune warns of after every short epoch.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    # Ray Data warns "no available CPUs, the Dataset job will hang" whenever a dataset is touched
    # while trials hold every CPU. Ours are materialized before any trial starts and need no
    # CPU tasks afterwards, so the warning is always a false alarm here.
    logging.getLogger("ray.data.dataset").setLevel(logging.ERROR)
    started = not ray.is_initialized()
    if started and os.environ.get("RAY_ADDRESS"):
        private_token(create=False)
        ray.init(logging_level=logging.WARNING, log_to_driver=False)
    elif started:
        # A new local Ray turns token authentication on and would write a missing token
        # readable by every local user: write it private first (orchestrator/ray_token.py).
        private_token()
        _start_twice_if_slow(_start_local)
        private_token(create=False)  # whatever Ray wrote while it started: 0600 too
    _data_stats_outside_trials()
    return started


def _data_stats_outside_trials() -> None:
    """Make Ray Data's stats actor now, from the driver, before any trial.

    Ray Data makes it (detached, one per Ray) in whichever process uses a dataset first. Where
    that is a trial, it lands in the trial's placement group (Tune's trials capture what they
    start) and dies with it when the Tune run ends; the next Tune run's first trial makes it
    again: a process start and `import ray.data` (2.9 s from asked to alive on AMD EPYC, 2
    cores), paid by each Tune run of a search; a fresh tiny search took 12.8 s against 14.8 s
    (docs/benchmarks.md). Made here it lives as long as this Ray; `.remote` does not wait."""
    try:
        from ray.data._internal.stats import get_or_create_stats_actor
    except ImportError:  # moved in a later Ray: trials make it, as before
        return
    get_or_create_stats_actor()


# Ray gives a new node's raylet 30 s to register (ray/_private/node.py, not configurable), and
# it registers only once its agents (Python processes importing most of Ray) are up: on 2 cores
# busy with other work (a second search, a test suite's own Rays) that took longer, once in CI.
# A second start, once what the first left is stopped, costs ~5 s where failing costs the run.
LOCAL_STARTS = 2


def _start_twice_if_slow(start: Callable[[], None]) -> None:
    for attempt in range(1, LOCAL_STARTS + 1):
        before = _children()
        try:
            start()
            return
        except Exception as err:  # Ray raises a bare Exception for this one
            if attempt == LOCAL_STARTS or "timed out during startup" not in str(err):
                raise
            # What the failed start left running (GCS, raylet, agents, dashboard) would hold
            # CPU and shared memory beside the next one.
            _stop(_children() - before)
            logger.warning("the local Ray did not start within Ray's 30 s (a busy machine?): "
                           "starting it again")


def _start_local() -> None:
    import ray

    dashboard = _own_dashboard()
    env = {**LOCAL_RAY_ENV, **dashboard}
    with _loopback_only(), _agent_on_a_free_port(), _in_rays_processes(env):
        ray.init(
            # "local" always starts a fresh instance: never silently join a stray `ray start` head
            # (RAY_ADDRESS is the explicit way to join a cluster).
            address="local",
            # Every server of this Ray (GCS, raylet, workers' gRPC, agents, metrics, dashboard)
            # binds to 127.0.0.1 when the node's IP is 127.0.0.1; see `_loopback_only`.
            _node_ip_address=LOOPBACK,
            dashboard_host=LOOPBACK,
            dashboard_port=int(dashboard["RAY_API_SERVER_ADDRESS"].rsplit(":", 1)[1]),
            logging_level=logging.WARNING,
            # Worker and Train-controller logs stay in Ray's log folder (session_latest/logs); the
            # console shows the search's own progress, one line per trial epoch.
            log_to_driver=False,
        )


def _children() -> set:
    import psutil

    return set(psutil.Process().children(recursive=True))


def _stop(processes: set) -> None:
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(list(processes), timeout=10)


LOOPBACK = "127.0.0.1"


@contextlib.contextmanager
def _loopback_only():
    """Let a local Ray keep 127.0.0.1 as its node IP.

    Ray 2.60 binds its gRPC servers (GCS, raylet, every worker), its agents and its metrics
    endpoint to all interfaces unless the node IP is loopback, and `ray.init` replaces a loopback
    `_node_ip_address` by the machine's routable address (`services.resolve_ip_for_localhost`)
    unless clusters are disabled (`ray_constants.ENABLE_RAY_CLUSTER`, read once at import, and its
    env var for the processes Ray starts). Both are flipped only while Ray starts; a search that
    joins a cluster (RAY_ADDRESS) never comes here. tests/integration/test_loopback.py lists the
    listening sockets of every Ray process and fails if Ray changes this.
    """
    from ray._private import ray_constants

    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        with _in_rays_processes({ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR: "0"}):
            yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag


@contextlib.contextmanager
def _in_rays_processes(env: dict[str, str]):
    """Give a local Ray's processes `env` by their inheritance, not a job runtime env.

    The raylet starts every worker with its own environment, and prestarts one idle worker per
    CPU when the driver connects. A worker is given to an actor only where its runtime env
    matches the actor's: with these variables as the job's runtime env, no prestarted worker
    ever matched, each lived idle to the end (a process importing Ray: 42 of them, 154 s of CPU
    in one test suite) and each actor waited for a new one, set up through the runtime-env
    agent (~1.0 s to an actor's first call against ~0.7 s, AMD EPYC, 2 cores). Set only while
    Ray starts (`_loopback_only` sets its variable so too): the caller's own environment is left
    as it was.
    """
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _agent_on_a_free_port():
    """Let a local Ray's dashboard agent serve HTTP on a free port instead of Ray's fixed 52365.

    `ray.init` gives every local node that port (`RayParams`' default; only `ray start` takes
    another), so the second Ray on a machine (a second search, a test's own) finds it taken: its
    agent retries for ~3 s, inside the 30 s Ray gives a raylet to register, then serves no HTTP
    at all. 0 lets the agent bind any free port and report it (ray/_private/node.py). Only while
    Ray starts, as `_loopback_only`; a search that joins a cluster never comes here.
    """
    from ray._private import parameter, ray_constants

    ray_params, fixed = parameter.RayParams, ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT

    class RayParams(ray_params):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.dashboard_agent_listen_port == fixed:
                self.dashboard_agent_listen_port = 0

    parameter.RayParams = RayParams
    try:
        yield
    finally:
        parameter.RayParams = ray_params


def _own_dashboard() -> dict[str, str]:
    """Workers' env naming this Ray's own dashboard. Ray Train's placement-group cleaner finds
    the state API by auto-detection, which fails when several local Ray instances share the
    machine: the trial's placement group is then never freed and the next trial waits forever."""
    import socket

    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port = s.getsockname()[1]
    return {"RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}"}
