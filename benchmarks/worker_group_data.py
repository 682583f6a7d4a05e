"""What a 2-worker trial pays to get its data: shares cut by the driver against Ray Train's split.

    python benchmarks/worker_group_data.py             # 3 alternated pairs, ~4 min on 2 cores
    python benchmarks/worker_group_data.py --pairs 5

"cut": the driver cuts the training set into each worker count's equal shares once per search
(`trainables.data.pipeline.to_ray_datasets(worker_counts=...)`); a worker reads its share.
"split": none cut (PRESPLIT_SHARE = 0, what a set too big for the object store gets): Ray Train
splits the training set per trial (a dataset manager and a streaming split coordinator).

Each search is one 2-worker trial of one epoch on a tiny set (the tests' 240 images of 16x16),
so what differs is the fixed cost: trial wall time (its worker group started, fed, torn down) and
its one epoch (which includes the first read of the share). One local Ray for the whole run, a
warm-up search first; the two modes alternate so that a drift of the machine hits both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trainables.data.pipeline as pipeline  # noqa: E402
from orchestrator import NullTracker, SearchSpec, run_search  # noqa: E402

CUT_SHARE = pipeline.PRESPLIT_SHARE


def measure(mode: str, data: str, out: Path) -> dict:
    pipeline.PRESPLIT_SHARE = CUT_SHARE if mode == "cut" else 0.0
    spec = SearchSpec(
        name=f"group-data-{mode}", data=data, epochs=1, num_trials=1, space={},
        baseline="none", profile="off", output_dir=str(out),
        base={"batch_size": 16, "lr": 0.01, "patch_size": 12, "width": 0.25, "workers": 2})
    started = time.perf_counter()
    result = run_search(spec, tracker=NullTracker(), out=open("/dev/null", "w"))
    row = result.trials.iloc[0]
    assert row["status"] == "completed", row["reason"]
    return {"search_s": time.perf_counter() - started, "trial_wall_s": float(row["trial_wall_s"]),
            "epoch_s": float(row["train_time_s"])}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args(argv)

    from orchestrator.resources import init_ray
    from tests.conftest import make_npz

    init_ray()
    out = Path(tempfile.mkdtemp(prefix="group-data-"))
    data = make_npz(out / "tiny.npz")
    measure("cut", data, out)  # warm-up: Ray's worker pool, imports, the OS page cache
    runs: dict[str, list[dict]] = {"cut": [], "split": []}
    for pair in range(args.pairs):
        for mode in (("cut", "split") if pair % 2 == 0 else ("split", "cut")):
            runs[mode].append(measure(mode, data, out))
            print(f"pair {pair + 1} {mode:5s} " + "  ".join(
                f"{k} {v:.2f}" for k, v in runs[mode][-1].items()), flush=True)
    print(f"\n{'median (min-max)':18s} {'cut':>20s} {'split':>20s}  cut/split")
    for key in ("trial_wall_s", "epoch_s", "search_s"):
        cut = [r[key] for r in runs["cut"]]
        split = [r[key] for r in runs["split"]]
        print(f"{key:18s} {statistics.median(cut):8.2f} ({min(cut):.2f}-{max(cut):.2f})"
              f" {statistics.median(split):8.2f} ({min(split):.2f}-{max(split):.2f})"
              f"  {statistics.median(cut) / statistics.median(split):.2f}")


if __name__ == "__main__":
    main()
