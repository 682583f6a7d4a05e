"""The headline: time to the baseline's accuracy, baseline against the configuration a
match_baseline search finds, measured end to end in one run (issue 17).

    python benchmarks/headline.py --quick                   # classifier, a few minutes
    python benchmarks/headline.py                           # classifier and unet3d, ~1 h

Per workload:
 1. the seeds baseline (legacy loop, fp32, batch 32) trains until its validation score stops
    improving (`--patience` epochs without a new best, at most `--max-epochs`): score S, and
    the training time at which it first reached S (epoch E);
 2. a match_baseline search against that measured baseline (`baseline=` its record: S and
    its time to S, not run again), `full_epochs=E`: `--trials` trials planned for
    `--max-epochs`, each stopped once decided, at the epoch it reaches S - tolerance or once its
    training time passes the baseline's (`--budget` seconds at most for the search);
 3. that configuration is trained again from scratch, as `orchestrator train` does, until
    val_score >= S - tolerance (a time_to_target run: it stops there);
 4. both times, both scores, the ratio, the search's cost and its payback in full runs.
Training times are `train_time_s` (inside the training steps). Before each run the script waits
until every CPU of the previous run is free again, so no leftover actor shares the cores.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import SearchSpec, run_search, train_config  # noqa: E402
from orchestrator.baseline import SEEDS_BEFORE  # noqa: E402

SPACES = {  # the knobs the seeds and the loop offer, and the rule by which lr follows the batch
    "classifier": {"precision": ["fp32", "bf16-mixed"], "batch_size": [32, 64, 128, 256],
                   "width": [0.5, 1.0],
                   "lr_scaling": ["sqrt", "linear"]},
    "unet3d": {"precision": ["fp32", "bf16-mixed"], "batch_size": [2, 4, 8],
               "width": [0.5, 1.0], "patch_size": [16, 24], "lr_scaling": ["sqrt", "linear"]},
}


def wait_idle(timeout_s: float = 120.0) -> None:
    """Wait until the previous run's actors are gone (every resource free again)."""
    import ray

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0):
            return
        time.sleep(0.5)


def epoch_history(tracking_uri: str, parent_run_id: str) -> list[tuple[int, float, float]]:
    """(epoch, val_score, train_time_s) per epoch of the one trial under `parent_run_id`."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_run(parent_run_id).info.experiment_id
    child = client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent_run_id}'")[0]
    run_id = child.info.run_id
    score = {m.step: m.value for m in client.get_metric_history(run_id, "val_score")}
    times = {m.step: m.value for m in client.get_metric_history(run_id, "train_time_s")}
    return [(e, score[e], times[e]) for e in sorted(score) if e in times]


def plateau(history, patience: int) -> tuple[float, float, int]:
    """Best score S, the training time when it was first reached, and that epoch."""
    best, best_t, best_e = -math.inf, math.nan, 0
    for epoch, score, t in history:
        if score > best:
            best, best_t, best_e = score, t, epoch
    return best, best_t, best_e


def time_to(history, target: float) -> tuple[float, float, int]:
    for epoch, score, t in history:
        if score >= target:
            return t, score, epoch
    return math.nan, max((s for _, s, _ in history), default=math.nan), 0


def run_workload(workload: str, args, root: Path, uri: str) -> dict:
    common = {"output_dir": str(root / "runs"), "tracking_uri": uri, "seed": args.seed}
    # 1. the baseline until its score stops improving (the legacy loop early-stops too)
    wait_idle()
    base_cfg = {"workload": workload, **SEEDS_BEFORE, "epochs": args.max_epochs,
                "early_stop_patience": args.patience, "seed": args.seed}
    if workload == "unet3d":  # the 3D seed's habits (orchestrator/baseline.py)
        base_cfg |= {"batch_size": 2, "width": 1.0, "grad_checkpointing": False}
    cfg_path = root / f"{workload}-baseline.json"
    cfg_path.write_text(json.dumps({"name": f"headline-{workload}", "data": None,
                                    "config": base_cfg}))
    t0 = time.time()
    base = train_config(cfg_path, name=f"headline-{workload}-baseline", workload=workload,
                        **common)
    base_hist = epoch_history(uri, base.parent_run_id)
    s, s_time, s_epoch = plateau(base_hist, args.patience)
    base_wall = time.time() - t0
    target = s - args.tolerance

    # 2. the search, against that measured baseline (S and its time to S; not run again):
    #    trials as long as they need, each stopped once decided
    record = root / f"{workload}-baseline-record.json"
    record.write_text(json.dumps({
        "kind": "seeds", "config": base_cfg, "status": "completed", "val_score": s,
        "train_time_s": s_time, "full_run_s": s_time, "parent_run_id": base.parent_run_id}))
    wait_idle()
    spec = SearchSpec(name=f"headline-{workload}-search", workload=workload,
                      space=SPACES[workload], epochs=args.max_epochs,
                      num_trials=args.trials, time_budget_s=args.budget,
                      objective="match_baseline", baseline=str(record),
                      tolerance=args.tolerance, full_epochs=s_epoch, early_stopping=False,
                      **common)
    search = run_search(spec)
    search_cost = search.wall_time_s

    # 3. the found configuration, from scratch, until it reaches S - tolerance
    wait_idle()
    found = {}
    if search.best_config_path:
        again = train_config(search.best_config_path, name=f"headline-{workload}-found",
                             epochs=args.max_epochs, workload=workload,
                             objective="time_to_target", target=target, **common)
        found_t, found_s, found_e = time_to(epoch_history(uri, again.parent_run_id), target)
        found = {"config": {k: search.best_config[k] for k in SPACES[workload]},
                 "time_s": found_t, "score": found_s, "epoch": found_e}
    return {"workload": workload, "S": s, "target": target, "baseline_time_s": s_time,
            "baseline_epoch": s_epoch, "baseline_wall_s": base_wall, "found": found,
            "search_cost_s": search_cost, "trials": search.trials.to_dict("records")}


def report(r: dict) -> list[str]:
    f = r["found"]
    lines = [f"\n== {r['workload']}: time to the baseline's accuracy (train_time_s) ==",
             f"{'':22}{'baseline (seeds)':>18}{'found config':>18}",
             f"{'val score':22}{r['S']:>18.4f}{f.get('score', math.nan):>18.4f}",
             f"{'target (S - tol)':22}{r['target']:>18.4f}{r['target']:>18.4f}",
             f"{'time to it, s':22}{r['baseline_time_s']:>18.1f}{f.get('time_s', math.nan):>18.1f}",
             f"{'epoch reached':22}{r['baseline_epoch']:>18}{f.get('epoch', 0):>18}"]
    ratio = r["baseline_time_s"] / f["time_s"] if f and f["time_s"] == f["time_s"] else math.nan
    saved = r["baseline_time_s"] - f.get("time_s", math.nan)
    lines.append(f"speedup                {ratio:.2f}x" if ratio == ratio else
                 "speedup                none: the found config did not reach the target")
    lines.append(f"found config           {f.get('config')}")
    lines.append("search's trials        status, knobs, time to target or why it stopped:")
    for t in (t for t in r.get("trials", []) if t.get("role") == "trial"):
        knobs = {k: t.get(k) for k in SPACES[r["workload"]]}
        tt = t.get("time_to_target_s")
        what = f"{tt:.1f} s to target" if isinstance(tt, float) and tt == tt else \
            (t.get("reason") or f"best {t.get('val_score', math.nan):.4f}")
        lines.append(f"  {t.get('status', ''):14}{knobs}  {what}")
    lines.append(f"search cost            {r['search_cost_s']:.0f} s wall")
    if saved == saved and saved > 0:
        lines.append(f"payback                after {r['search_cost_s'] / saved:.1f} runs "
                     f"(saves {saved:.1f} s of training per run)")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="classifier only, short runs")
    ap.add_argument("--workloads", nargs="+", default=None)
    ap.add_argument("--max-epochs", type=int, default=None)
    ap.add_argument("--patience", type=int, default=None)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--budget", type=float, default=None, help="search budget, s per workload")
    ap.add_argument("--tolerance", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for runs and MLflow (default: a temp)")
    args = ap.parse_args(argv)
    quick = {"workloads": ["classifier"], "max_epochs": 6, "patience": 2, "trials": 4,
             "budget": 600.0}
    full = {"workloads": ["classifier", "unet3d"], "max_epochs": 30, "patience": 3,
            "trials": 20, "budget": 1800.0}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    import ray

    from orchestrator.resources import init_ray

    init_ray()  # one Ray session for every run below (each run joins it)
    root = Path(args.out or tempfile.mkdtemp(prefix="headline-"))
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    results = [run_workload(w, args, root, uri) for w in args.workloads]
    ray.shutdown()
    for r in results:
        print("\n".join(report(r)))
    (root / "headline.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"\nresults: {root / 'headline.json'}  (MLflow: {uri})")


if __name__ == "__main__":
    main()
