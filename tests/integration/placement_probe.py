"""Runs a tiny search with SPREAD placement on a simulated 2-node Ray cluster
(`ray.cluster_utils.Cluster`) and prints what its trial's workers saw as JSON.

Only SPREAD is run. On this idle cluster the default, PACK, puts a 2-worker trial on one node
(both nodes hold it), so two nodes show that the setting reached Ray's placement group. A PACK
search here could show nothing more: Ray's PACK is best effort and has spread a trial over both
nodes (an xfail, ~19 s of the suite's time, that could not fail on a PACK ignored).

Run by tests/integration/probes.py in a subprocess, because a simulated cluster and the
suite's shared local Ray cannot both be connected in one process:
    python -m tests.integration.placement_probe OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def run_one(placement: str, data: str, out: Path) -> dict:
    """One 2-worker trial with this placement; what its workers saw, read back from MLflow."""
    import ray
    from mlflow.tracking import MlflowClient

    from orchestrator import SearchSpec, run_search

    spec = SearchSpec(
        name=f"placement-{placement.lower()}", data=data, epochs=1, num_trials=1,
        space={}, placement=placement, output_dir=str(out / "runs"), baseline="none",
        profile="off",  # where the workers land is the subject, not what they pick
        tracking_uri=f"sqlite:///{out / 'mlflow.db'}",
        base={"batch_size": 16, "lr": 0.01, "patch_size": 12, "width": 0.25,
              "workers": 2},
    )
    result = run_search(spec)
    client = MlflowClient(spec.tracking_uri)
    exp = client.get_experiment_by_name(spec.name)
    child = [r for r in client.search_runs([exp.experiment_id])
             if r.data.tags.get("mlflow.parentRunId")][0]
    return {
        "status": result.trials.iloc[0]["status"],
        "nodes": child.data.metrics.get("final_nodes"),
        "free_cpus_after": ray.available_resources().get("CPU", 0),
    }


def main(out: Path) -> dict:
    import ray
    import ray._private.utils
    from ray.cluster_utils import Cluster

    from orchestrator.resources import RAY_ENV, _own_dashboard
    from tests.conftest import make_npz

    # Cluster() writes its address to /tmp/ray/ray_current_cluster, where any `ray.init()` or
    # Ray CLI on this machine would find and join it: keep it private.
    ray._private.utils.write_ray_address = lambda *args, **kwargs: None
    # A dashboard of its own, named to its processes: Ray Train's placement-group cleaner finds
    # the state API by auto-detection, which picks another Ray's dashboard when other local Ray
    # instances run beside this one (the other probes do): a trial's placement group was then
    # freed late (a second search here, when there was one, waited for CPUs: 62 s -> 132 s).
    dashboard = _own_dashboard()
    os.environ.update({**RAY_ENV, **dashboard})  # the nodes' processes inherit it
    port = int(dashboard["RAY_API_SERVER_ADDRESS"].rsplit(":", 1)[1])
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "dashboard_host": "127.0.0.1", "dashboard_port": port})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        cluster.connect()
        data = make_npz(out / "tiny.npz")
        report = {"address": cluster.address,
                  "nodes": len([n for n in ray.nodes() if n["Alive"]])}
        report["SPREAD"] = run_one("SPREAD", data, out)
        return report
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    out_dir = Path(sys.argv[1])
    print("PLACEMENT " + json.dumps(main(out_dir)), flush=True)
