"""Record real trial results over a grid of the default space (once), for search_quality.py.

    python benchmarks/record_lookup_table.py               # writes benchmarks/data/classifier_grid.csv

Each row is a real training run of the built-in classifier (this process, no Ray: the loop and
data are the same as in a trial): precision x batch_size x patch_size x width, 1 worker,
2 epochs on 4000 samples. Takes ~5-10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainables.config import TrialConfig  # noqa: E402
from trainables.loop import LoopIO, fit  # noqa: E402
from trainables.workloads import WORKLOADS  # noqa: E402

GRID = {
    "precision": ["fp32", "bf16-mixed"],
    "batch_size": [32, 64, 128, 256],
    "patch_size": [16, 24, 32],
    "width": [0.5, 1.0, 2.0],
}
OUT = Path(__file__).parent / "data" / "classifier_grid.csv"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    data = WORKLOADS["classifier"].data()
    meta = data.meta()
    x = torch.from_numpy(data.x_train[: args.samples])
    y = torch.from_numpy(data.y_train[: args.samples])
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    rows = []
    for values in itertools.product(*GRID.values()):
        knobs = dict(zip(GRID, values))
        cfg = TrialConfig(epochs=args.epochs, **knobs)
        bs = cfg.batch_size

        def train_batches(epoch, bs=bs):
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
            for i in range(0, len(x) - bs + 1, bs):
                yield x[order[i : i + bs]], y[order[i : i + bs]]

        io = LoopIO(train_batches=train_batches, steps_per_epoch=len(x) // bs,
                    val_batches=lambda: ((xv[i : i + 500], yv[i : i + 500])
                                         for i in range(0, len(xv), 500)))
        m = fit(cfg, meta, io)
        rows.append({**knobs, "val_score": m["val_score"], "train_time_s": m["train_time_s"]})
        print(f"{len(rows):3d} {knobs} score={m['val_score']:.3f} time={m['train_time_s']:.2f}s",
              flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
