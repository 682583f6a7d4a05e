"""The CUDA paths of the optimized loop, measured side by side on one GPU (no Ray).

    python benchmarks/gpu_paths.py                       # classifier and unet3d, 3 repeats
    python benchmarks/gpu_paths.py --quick               # 1 repeat, 1 epoch, fewer samples

What runs (each row is the optimized loop, `trainables.loop.fit`, on the same samples):
* feeds: the worker's shard on the GPU (what `cache_shard` does when it fits), in page-locked host
  memory with non-blocking copies, and in pageable host memory (blocking copies);
* precision: fp32 (convs in TF32, PyTorch's default for cuDNN), bf16 autocast, fp16 autocast with
  GradScaler; channels_last; cuDNN benchmark; torch.compile ('default' and 'reduce-overhead',
  which adds CUDA graphs); a bigger batch;
* NCCL: a one-rank process group, the model wrapped in DDP as Ray Train wraps it, and the
  all-reduce bandwidth of a 256 MiB tensor;
* NVML: one system sample as a trial's sampler takes it (trainables/trial/sampling.py);
* the screen on GPU: candidates timed for a few steps, and one that cannot fit in a capped share of
  the GPU's memory comes back infeasible, not as a crash.

Rows are interleaved across repeats and medians kept. samples/s counts the steady steps (the
compile and cuDNN's first-step search are reported apart, as `warmup_s`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainables.config import TrialConfig  # noqa: E402
from trainables.data.shard_cache import TensorShard  # noqa: E402
from trainables.loop import LoopIO, fit  # noqa: E402
from trainables.workloads import WORKLOADS  # noqa: E402

SETTINGS = {
    "classifier": dict(width=1.0, patch_size=24, batch_size=128, lr=3e-3),
    "unet3d": dict(width=1.0, patch_size=24, batch_size=4, lr=3e-3),
}
BIG_BATCH = {"classifier": 512, "unet3d": 16}


class ArrayShard:
    """What `TensorShard.load` reads from a Ray Data shard (whole blocks as numpy), from arrays."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def iter_batches(self, **_):
        yield {"x": self.x, "y": self.y}


def rows_for(workload: str) -> dict[str, dict]:
    """name -> (feed, switches). The first row is plain PyTorch on a GPU: fp32, pageable copies."""
    plain = dict(precision="fp32", cudnn_benchmark=False, pin_memory=False)
    fast = dict(precision="bf16-mixed", channels_last=True)
    big = BIG_BATCH[workload]
    return {
        "fp32, pageable host feed, no cuDNN benchmark": ("pageable", plain),
        "fp32, pinned host feed (non-blocking copies)": ("pinned", {**plain, "pin_memory": True}),
        "fp32, shard on the GPU": ("device", plain),
        "fp32, shard on the GPU, cuDNN benchmark": ("device", {"precision": "fp32"}),
        "fp16-mixed (GradScaler)": ("device", {"precision": "fp16-mixed"}),
        "bf16-mixed": ("device", {"precision": "bf16-mixed"}),
        "bf16-mixed, channels_last": ("device", fast),
        "bf16-mixed, channels_last, compile": ("device", {**fast, "compile": True}),
        "fp32, compile reduce-overhead": (
            "device", {"precision": "fp32", "compile": True, "compile_mode": "reduce-overhead"}),
        "bf16-mixed, channels_last, compile reduce-overhead": (
            "device", {**fast, "compile": True, "compile_mode": "reduce-overhead"}),
        f"bf16-mixed, channels_last, batch {big}": ("device", {**fast, "batch_size": big}),
        f"bf16-mixed, channels_last, compile, batch {big}": (
            "device", {**fast, "compile": True, "batch_size": big}),
    }


def loop_rows(workload: str, epochs: int, repeats: int, samples: int | None,
              device: torch.device, only: list[str] | None = None) -> list[dict]:
    data = WORKLOADS[workload].data()
    meta = data.meta()
    n = samples or len(data.x_train)
    x_np, y_np = data.x_train[:n], data.y_train[:n]
    xv, yv = torch.from_numpy(data.x_val).to(device), torch.from_numpy(data.y_val).to(device)
    val_step = 256 if meta.task == "classify" else 1

    def feed(kind: str) -> TensorShard:
        """The worker's shard as `TensorShard.load` keeps it: on the GPU when it fits, else in
        page-locked host memory; "pageable" is a plain host copy (blocking copies)."""
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
        if kind == "device":
            return TensorShard(x.to(device), y.to(device))
        if kind == "pinned" and device.type == "cuda":  # (--cpu: nothing to pin for)
            return TensorShard(x.pin_memory(), y.pin_memory())
        return TensorShard(x, y)

    def run(kind: str, switches: dict) -> dict:
        cfg = TrialConfig(workload=workload, epochs=epochs, seed=0,
                          **{**SETTINGS[workload], **switches})
        shard = feed(kind)
        io = LoopIO(
            train_batches=lambda epoch: shard.epoch(cfg.batch_size, seed=0, epoch=epoch, rank=0,
                                                    device=device),
            val_batches=lambda: ((xv[i:i + val_step], yv[i:i + val_step])
                                 for i in range(0, len(xv), val_step)),
            steps_per_epoch=len(shard) // cfg.batch_size, device=device)
        m = fit(cfg, meta, io)
        torch._dynamo.reset()  # each compiled row compiles its own model, as a fresh trial would
        return m

    rows = rows_for(workload)
    if only:  # the first row stays: every other row is compared with it
        rows = {name: row for i, (name, row) in enumerate(rows.items())
                if i == 0 or any(o in name for o in only)}
    results: dict[str, list[dict]] = {name: [] for name in rows}
    for rep in range(repeats):
        for name, (kind, switches) in rows.items():
            try:
                m = run(kind, switches)
            except Exception as err:  # noqa: BLE001 - a row that fails is reported, not fatal
                m = {"error": f"{type(err).__name__}: {err}"[:300]}
            results[name].append(m)
            if "error" in m:
                print(f"  [{rep + 1}/{repeats}] {name}: {m['error']}", flush=True)
            else:
                print(f"  [{rep + 1}/{repeats}] {name:<52} {m['steady_samples_per_s']:>10,.0f}"
                      f" samples/s  warm-up {m['warmup_s']:5.1f} s  score {m['val_score']:.4f}"
                      f"  peak {m['peak_mem_mb']:,.0f} MB", flush=True)
    out = []
    for name, ms in results.items():
        ok = [m for m in ms if "error" not in m]
        if not ok:
            out.append({"row": name, "error": ms[0]["error"]})
            continue
        sps = [m["steady_samples_per_s"] for m in ok]
        out.append({"row": name, "samples_per_s": statistics.median(sps),
                    "spread": [min(sps), max(sps)],
                    "warmup_s": statistics.median(m["warmup_s"] for m in ok),
                    "train_time_s": statistics.median(m["train_time_s"] for m in ok),
                    "val_score": statistics.median(m["val_score"] for m in ok),
                    "peak_mem_mb": max(m["peak_mem_mb"] for m in ok), "n": len(ok)})
    base = out[0].get("samples_per_s")
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU"
    print(f"\n{workload}: {n} samples x {epochs} epochs, {name}, "
          f"torch {torch.__version__}, median of {repeats}")
    print("| loop | steady samples/s (min-max) | vs first row | warm-up s | score | peak MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in out:
        if "error" in r:
            print(f"| {r['row']} | failed: {r['error']} | | | | |")
            continue
        print(f"| {r['row']} | {r['samples_per_s']:,.0f} ({r['spread'][0]:,.0f}-"
              f"{r['spread'][1]:,.0f}) | {r['samples_per_s'] / base:.2f}x | {r['warmup_s']:.1f} | "
              f"{r['val_score']:.4f} | {r['peak_mem_mb']:,.0f} |")
    return out


def nccl_check(workload: str, epochs: int) -> dict:
    """A one-rank NCCL group with the model in DDP (Ray Train's prepare_model wraps it so)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("nccl", rank=0, world_size=1)
    device = torch.device("cuda", 0)
    try:
        t = torch.ones(64 * 2**20, device=device)  # 256 MiB of fp32
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        t0, reps = time.perf_counter(), 20
        for _ in range(reps):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        gbps = reps * t.nbytes / (time.perf_counter() - t0) / 1e9
        data = WORKLOADS[workload].data()
        meta = data.meta()
        shard = TensorShard(torch.from_numpy(data.x_train).to(device),
                            torch.from_numpy(data.y_train).to(device))
        xv, yv = torch.from_numpy(data.x_val).to(device), torch.from_numpy(data.y_val).to(device)

        def all_reduce(x):
            dist.all_reduce(x)
            return x

        def run(ddp: bool) -> dict:
            cfg = TrialConfig(workload=workload, epochs=epochs, **SETTINGS[workload],
                              precision="bf16-mixed", channels_last=True)
            io = LoopIO(
                train_batches=lambda epoch: shard.epoch(cfg.batch_size, seed=0, epoch=epoch,
                                                        rank=0, device=device),
                val_batches=lambda: ((xv[i:i + 256], yv[i:i + 256])
                                     for i in range(0, len(xv), 256)),
                steps_per_epoch=len(shard) // cfg.batch_size, device=device,
                all_reduce=all_reduce if ddp else (lambda x: x),
                wrap_model=(lambda m: DistributedDataParallel(m, device_ids=[0])) if ddp
                else (lambda m: m))
            return fit(cfg, meta, io)

        plain, ddp = run(False), run(True)
        result = {"all_reduce_GBps_1rank": gbps, "plain_samples_per_s":
                  plain["steady_samples_per_s"], "ddp_samples_per_s": ddp["steady_samples_per_s"],
                  "plain_score": plain["val_score"], "ddp_score": ddp["val_score"]}
    finally:
        dist.destroy_process_group()
    print(f"\nNCCL (1 rank): all-reduce of 256 MiB at {gbps:.0f} GB/s (a one-rank ring copies "
          f"nothing across GPUs); {workload} in DDP {result['ddp_samples_per_s']:,.0f} samples/s "
          f"against {result['plain_samples_per_s']:,.0f} without DDP, scores "
          f"{result['ddp_score']:.4f} / {result['plain_score']:.4f}")
    return result


def nvml_check() -> dict:
    from trainables.trial.sampling import NodeSampler

    x = torch.randn(8192, 8192, device="cuda")
    with NodeSampler(device=torch.device("cuda", 0), interval_s=0.2) as sampler:
        for _ in range(200):
            x = (x @ x).clamp_(-1, 1)
        torch.cuda.synchronize()
        time.sleep(0.5)
        payload = sampler.payload(final=True)
    gpu = {k: v for _, values in payload["samples"] for k, v in values.items()
           if k.startswith("gpu_")}
    print(f"\nNVML sample names: {sorted(gpu)}\n  tags: {payload.get('tags')}")
    return {"names": sorted(gpu), "last": gpu, "tags": payload.get("tags")}


def screen_check() -> list[dict]:
    """Screen three candidates; the last (a huge unet3d batch) under a 2 GiB memory cap."""
    from trainables.trial.screen import ScreenPlan, screen

    data = WORKLOADS["unet3d"].data()
    meta = data.meta()
    base = dict(workload="unet3d", epochs=1, width=1.0, patch_size=24, lr=3e-3)
    plan = ScreenPlan(candidates=[{**base, "batch_size": 4, "precision": "bf16-mixed"},
                                  {**base, "batch_size": 4, "precision": "fp32"},
                                  {**base, "batch_size": 96, "patch_size": 32,
                                   "precision": "fp32", "width": 2.0}],
                      meta=meta, n_train=len(data.x_train), threads=4)
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(2 * 2**30 / total)
    try:
        shard = ArrayShard(data.x_train, data.y_train)
        results = screen(plan, shard, torch.device("cuda", 0))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    print("\nscreen on GPU (memory capped at 2 GiB):")
    for r in results:
        c = r["config"]
        print(f"  batch {c['batch_size']} patch {c['patch_size']} width {c['width']} "
              f"{c['precision']}: {r['status']}"
              + (f", {r['samples_per_s']:,.0f} samples/s, peak {r['peak_mb']:,.0f} MB"
                 if r["status"] == "completed" else f" ({r.get('reason', '')[:120]})"))
    return results


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", nargs="+", default=["classifier", "unet3d"],
                    choices=sorted(SETTINGS))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--only", nargs="+", help="run only the rows whose name holds one of these")
    ap.add_argument("--checks", nargs="*", default=["nvml", "screen", "nccl"],
                    help="the non-loop checks to run")
    ap.add_argument("--cpu", action="store_true", help="smoke-test the loop rows on the CPU")
    args = ap.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("gpu_paths.py measures the CUDA paths: no CUDA device here (--cpu smoke-tests)")
    if args.quick:
        args.repeats, args.epochs, args.samples = 1, 1, args.samples or 4096
    device = torch.device("cpu" if args.cpu else "cuda")
    out: dict = {"device": "CPU" if args.cpu else torch.cuda.get_device_name(0),
                 "torch": torch.__version__, "cuda": torch.version.cuda}
    checks = {"nvml": nvml_check, "screen": screen_check}
    for name, check in ((n, checks[n]) for n in ([] if args.cpu else args.checks) if n in checks):
        try:
            out[name] = check()
        except Exception as err:  # noqa: BLE001
            out[name] = {"error": repr(err)}
            print(f"\n{name} check failed: {err!r}")
    for workload in args.workloads:
        out[workload] = loop_rows(workload, args.epochs, args.repeats, args.samples, device,
                                  args.only)
    if args.cpu or "nccl" not in args.checks:
        return
    try:
        out["nccl"] = nccl_check(args.workloads[0], args.epochs)
    except Exception as err:  # noqa: BLE001
        out["nccl"] = {"error": repr(err)}
        print(f"\nNCCL check failed: {err!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
