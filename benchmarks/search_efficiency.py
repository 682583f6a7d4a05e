"""Search efficiency and Ray's fixed cost per trial, before and after in-process trials.

    python benchmarks/search_efficiency.py                 # 20 trials of ~30 s, then 5 "before"
    python benchmarks/search_efficiency.py --quick         # 4 + 2 short trials

efficiency = time inside training steps (sum of the trials' train_time_s) / the search's wall
time (run_search from call to return: Ray start-up, data upload, every trial, MLflow, teardown).

fixed cost per trial = trial wall time - train_time_s - eval_time_s (what Ray costs: starting
the trial actor or worker group, handing over the dataset, reporting, teardown).

"before": every trial is a Ray Train TorchTrainer worker group, even with one worker.
"after": single-worker trials run the same loop in the Tune trial process (the default).
Both modes search the same space (lr only, so every trial does the same work) on the same data.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import NullTracker, SearchSpec, run_search  # noqa: E402


def measure(trials: int, epochs: int, worker_group: bool, out_dir: str) -> dict:
    spec = SearchSpec(
        name=f"efficiency-{'before' if worker_group else 'after'}",
        num_trials=trials, epochs=epochs, seed=0, output_dir=out_dir, baseline="none",
        space={"lr": {"loguniform": [1e-3, 1e-2]}},
        base={"width": 1.0, "patch_size": 24, "batch_size": 64, "workers": 1,
              "checkpoint_every": 0},
        always_use_worker_group=worker_group,
    )
    started = time.perf_counter()
    result = run_search(spec, tracker=NullTracker(), out=open("/dev/null", "w"))
    wall = time.perf_counter() - started
    t = result.trials
    return {
        "trials": len(t),
        "wall_s": wall,
        "train_s": float(t["train_time_s"].sum()),
        "mean_trial_train_s": float(t["train_time_s"].mean()),
        "fixed_cost_s": statistics.median(t["fixed_cost_s"].dropna()),
        "efficiency": float(t["train_time_s"].sum()) / wall,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--before-trials", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=15, help="~2 s per epoch on 2 idle cores")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.before_trials, args.epochs = 4, 2, 2

    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows["after (in-process single-worker trials)"] = measure(
            args.trials, args.epochs, False, tmp)
        rows["before (TorchTrainer worker group per trial)"] = measure(
            args.before_trials, args.epochs, True, tmp)
    print("\n| mode | trials | mean train s/trial | median fixed cost s/trial | "
          "search wall s | efficiency |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['trials']} | {r['mean_trial_train_s']:.1f} | "
              f"{r['fixed_cost_s']:.2f} | {r['wall_s']:.0f} | {100 * r['efficiency']:.1f}% |")


if __name__ == "__main__":
    main()
