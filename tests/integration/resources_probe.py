"""Resources that fit the nodes, on real Ray schedulers; prints what it found as JSON.

- `gpu`: a simulated cluster (`ray.cluster_utils.Cluster`) of a CPU-only head and two nodes of
  4 CPUs and 1 fake GPU (cluster.yaml's g5.xlarge shape). The plan is taken from Ray; the
  resources a single-worker trial and a 2-worker trial ask for are placed as placement groups,
  which must become ready (a request no node can hold pends forever).
- `cpu`: a local Ray with fewer CPUs than the machine's cores (`num_cpus=1`, as a container's CPU
  quota does); a real one-trial search must plan on that 1 CPU and complete.

Run by tests/integration/probes.py in a subprocess (a simulated cluster and the
suite's shared local Ray cannot both be connected in one process):
    python -m tests.integration.resources_probe gpu|cpu OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _fits(bundles: list[dict], timeout_s: float = 30) -> bool:
    from ray.util.placement_group import placement_group, remove_placement_group

    pg = placement_group(bundles)
    try:
        return bool(pg.wait(timeout_seconds=timeout_s))
    finally:
        remove_placement_group(pg)


def gpu(out: Path) -> dict:
    import ray
    import ray._private.utils
    from ray.cluster_utils import Cluster

    from orchestrator import resources
    from trainables.data.arrays import DataMeta
    from trainables.trial.trainable import TrialContext, trial_resources

    # Cluster() writes its address where any `ray.init()` on this machine would join it.
    ray._private.utils.write_ray_address = lambda *args, **kwargs: None
    # No dashboard: placement groups need none, and it would take a port other Rays look at.
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=4, num_gpus=1)
        cluster.wait_for_nodes()
        cluster.connect()
        cpus, gpus, worker_cpus = resources.cluster_resources()
        plan = resources.plan(cpus, gpus, cpus_per_trial=None, max_concurrent=None,
                              max_workers=2, worker_cpus=worker_cpus)
        ctx = TrialContext(base={}, meta=DataMeta(1, 3), n_train=100, resources=plan,
                           storage_path=str(out))
        single = trial_resources(ctx)({"workers": 1}).bundles
        pair = [plan.worker(2)] * 2  # what run_trial's workers ask
        return {"free": [cpus, gpus, worker_cpus], "plan": [plan.use_gpu, plan.cpus_per_trial,
                                                            plan.gpus_per_trial,
                                                            plan.cpus_per_worker],
                "single_bundles": single, "single_fits": _fits(single),
                "pair_fits": _fits(pair)}
    finally:
        ray.shutdown()
        cluster.shutdown()


def cpu(out: Path) -> dict:
    import io

    import ray

    from orchestrator import SearchSpec, run_search
    from orchestrator.resources import RAY_ENV, init_ray
    from tests.conftest import make_npz

    os.environ.update(RAY_ENV)
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
    init_ray()  # the search's settings on the Ray it joins
    printed = io.StringIO()
    spec = SearchSpec(name="quota", baseline="none", profile="off",
                      data=make_npz(out / "tiny.npz"), epochs=1, num_trials=1,
                      space={}, output_dir=str(out / "runs"),
                      tracking_uri=f"sqlite:///{out / 'mlflow.db'}",
                      base={"batch_size": 16, "lr": 0.01, "patch_size": 12, "width": 0.25,
                            "workers": 1})
    try:
        result = run_search(spec, out=printed)
        return {"cores": os.cpu_count(), "ray_cpus": ray.cluster_resources().get("CPU"),
                "status": result.trials.iloc[0]["status"],
                "plan_line": [ln for ln in printed.getvalue().splitlines()
                              if "at a time" in ln]}
    finally:
        ray.shutdown()


if __name__ == "__main__":
    case, out_dir = sys.argv[1], Path(sys.argv[2])
    print("RESOURCES " + json.dumps({"gpu": gpu, "cpu": cpu}[case](out_dir)), flush=True)
