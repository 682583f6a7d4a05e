"""Loop speedup and ablation: common speed techniques, measured side by side in one run.

    python benchmarks/loop_speedup.py            # classifier, 3 epochs, 3 repeats
    python benchmarks/loop_speedup.py --quick    # 1 repeat, fewer samples
    python benchmarks/loop_speedup.py --workload unet3d

Every row trains the same model on the same samples for the same epochs, in this process
(no Ray: the loop alone is measured; benchmarks/data_pipeline.py measures the pipeline). Rows are
interleaved across repeats and the median samples/s is kept, so machine noise hits all alike.

* speedup: the legacy loop (seed habits: DataLoader worker processes over in-memory data, per-batch
  tqdm and two .item() syncs, blocking copies, zero_grad(), fp32) against the optimized loop with
  the best switches for this hardware.
* ablation: legacy with one technique turned on at a time, then all together.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainables.config import TrialConfig  # noqa: E402
from trainables.loop.legacy import TECHNIQUES, fit_legacy  # noqa: E402
from trainables.loop import LoopIO, fit  # noqa: E402
from trainables.workloads import WORKLOADS  # noqa: E402

SETTINGS = {
    "classifier": dict(width=1.0, patch_size=24, batch_size=64, lr=3e-3),
    "unet3d": dict(width=1.0, patch_size=24, batch_size=4, lr=3e-3),
}


def optimized_switches(use_cuda: bool) -> dict:
    """The best switches measured for each hardware (see docs/benchmarks.md)."""
    if use_cuda:
        # On an H100 these small models are launch-bound: CUDA graphs won (2.6x over legacy),
        # while bf16, channels_last and plain compile each cost a little (docs/benchmarks.md).
        return dict(compile=True, compile_mode="reduce-overhead")
    # On this CPU (avx512_bf16, no AMX): bf16 autocast and NHWC convs win; torch.compile's
    # one-off compilation costs more than a short trial gains (see docs/benchmarks.md).
    return dict(precision="bf16-mixed", channels_last=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=sorted(SETTINGS), default="classifier")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=None, help="training samples used")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-ablation", action="store_true")
    ap.add_argument("--switches", help="JSON: the optimized row's switches (default: the best "
                                       "measured for this hardware)")
    ap.add_argument("--patch-size", type=int, help="override the workload's patch size")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.samples = 1, args.samples or 2048

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.set_num_threads(torch.get_num_threads())
    data = WORKLOADS[args.workload].data()
    meta = data.meta()
    n = args.samples or len(data.x_train)
    x, y = torch.from_numpy(data.x_train[:n]), torch.from_numpy(data.y_train[:n])
    xv, yv = torch.from_numpy(data.x_val).to(device), torch.from_numpy(data.y_val).to(device)
    base = dict(workload=args.workload, epochs=args.epochs, seed=0, **SETTINGS[args.workload])
    if args.patch_size:
        base["patch_size"] = args.patch_size

    def val_batches():
        step = 256 if meta.task == "classify" else 1
        for i in range(0, len(xv), step):
            yield xv[i : i + step], yv[i : i + step]

    def io() -> LoopIO:
        return LoopIO(train_batches=None, val_batches=val_batches, steps_per_epoch=0,
                      device=device)

    def run_legacy(enable: frozenset[str]) -> dict:
        cfg = TrialConfig(loop="legacy", **base)
        # The legacy progress bar writes to stderr as it would in a Ray worker's log file; send
        # it to /dev/null here (cheaper than a terminal, so the baseline is flattered if at all).
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            return fit_legacy(cfg, meta, io(), x, y, enable=enable)

    def run_optimized(**switches) -> dict:
        cfg = TrialConfig(**{**base, **switches})
        bs = cfg.batch_size
        xd, yd = x.to(device), y.to(device)

        def train_batches(epoch):
            # The worker's shard held in memory: seeded randperm + index (what Ray Data feeds
            # after the first epoch; benchmarks/data_pipeline.py measures the pipeline itself).
            order = torch.randperm(len(xd), generator=torch.Generator().manual_seed(epoch),
                                   device="cpu").to(device)
            for i in range(0, len(xd) - bs + 1, bs):
                yield xd[order[i : i + bs]], yd[order[i : i + bs]]

        loop_io = io()
        loop_io.train_batches, loop_io.steps_per_epoch = train_batches, len(xd) // bs
        return fit(cfg, meta, loop_io)

    best = json.loads(args.switches) if args.switches else \
        optimized_switches(device.type == "cuda")
    rows: dict[str, callable] = {"legacy": lambda: run_legacy(frozenset())}
    if not args.no_ablation:
        for tech in TECHNIQUES:
            rows[f"legacy + {tech}"] = (lambda t=tech: run_legacy(frozenset({t})))
    rows[f"optimized ({', '.join(f'{k}={v}' for k, v in best.items())})"] = \
        lambda: run_optimized(**best)

    results: dict[str, list[dict]] = {name: [] for name in rows}
    for rep in range(args.repeats):
        for name, run in rows.items():
            m = run()
            results[name].append(m)
            print(f"  [{rep + 1}/{args.repeats}] {name:<40} {m['samples_per_s']:>9,.0f} samples/s"
                  f"  score {m['val_score']:.4f}", flush=True)

    dev = torch.cuda.get_device_name(0) if device.type == "cuda" else \
        f"CPU, {torch.get_num_threads()} threads"
    base_sps = statistics.median(m["samples_per_s"] for m in results["legacy"])
    base_score = statistics.median(m["val_score"] for m in results["legacy"])
    print(f"\nworkload {args.workload}, {n} samples x {args.epochs} epochs, {dev}, "
          f"median of {args.repeats}")
    print(f"| loop | samples/s | speedup vs legacy | {meta.task == 'classify' and 'accuracy' or 'Dice'}"
          " | change (points) |")
    print("|---|---:|---:|---:|---:|")
    for name, ms in results.items():
        sps = statistics.median(m["samples_per_s"] for m in ms)
        score = statistics.median(m["val_score"] for m in ms)
        print(f"| {name} | {sps:,.0f} | {sps / base_sps:.2f}x | {score:.4f} | "
              f"{100 * (score - base_score):+.2f} |")


if __name__ == "__main__":
    main()
