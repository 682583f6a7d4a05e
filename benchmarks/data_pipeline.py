"""Issue 4: the Ray Data in-memory pipeline against raw in-memory tensor indexing.

    /work/venv/bin/python benchmarks/data_pipeline.py [--quick]

Everything is measured inside one real Ray Train worker (TorchTrainer, 1 worker, 1 CPU, torch on
1 thread), on the shard that `ray.train.get_dataset_shard` gives it: what the training loop sees.
Methods, each one epoch over the same data, followed by the same random crop unless noted:
- raw:        randperm, index, crop on tensors already in memory (the target speed);
- stream:     `iter_torch_batches` every epoch, no shuffle (the pipeline before issue 4), with
              prefetch_batches=2 (and 1, 4: the prefetch depth knob);
- stream+shuf: the same through a seeded local shuffle buffer (`cache_shard=False`);
- stream+mapcrop: crop inside the pipeline (`map_batches` on whole blocks), no crop after;
- cached:     the shard read once into tensors, then seeded randperm epochs (`cache_shard=True`).
Every method's epoch runs right after a raw epoch and the pair's time ratio is kept; the table
shows the median of those paired ratios (neighbouring runs share the contention of other
processes on this 2-core machine), and the median rate. Overhead is the extra time per batch,
(1/ratio - 1) * batch / raw rate, in microseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

import numpy as np  # noqa: E402

WORKLOADS = {
    # name: (samples, sample shape, patch, batch sizes)
    "2D": (8000, (1, 32, 32), 24, (32, 128, 512)),
    "3D": (512, (1, 32, 32, 32), 24, (4, 16)),
}
METHODS = ("raw", "stream", "stream pf=1", "stream pf=4", "stream+shuf", "stream+mapcrop",
           "cached")


def _crop_pair(x, y, patch: int, gen=None):
    """What the loop's task does: classes pass through; label volumes are cropped with their
    images, as one gather (`trainables.loop.tasks.SegmentTask.crop`)."""
    from trainables.data.crops import random_crop
    from trainables.loop.tasks import SegmentTask

    if y.ndim > 1:
        return SegmentTask().crop(x, y, patch, gen)
    return random_crop(x, patch, gen), y


def _crop_in_pipeline(patch: int):
    def crop(batch: dict) -> dict:
        import torch

        x, y = _crop_pair(torch.from_numpy(batch["x"]), torch.from_numpy(batch["y"]), patch)
        return {"x": x.contiguous().numpy(), "y": y.to(torch.uint8).numpy()}

    return crop


def _bench_worker(config: dict) -> dict:
    """Runs inside the Ray Train worker: every method, interleaved, `reps` times."""
    import ray.train
    import torch

    from trainables.data.pipeline import ShardFeed, iter_batches
    from trainables.data.shard_cache import TensorShard, epoch_order

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    times: dict = {}
    pairs: dict = {}
    loads: dict = {}

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    for rep in range(config["reps"]):
        for name, (_, _, patch, batches) in config["workloads"].items():
            shard = ray.train.get_dataset_shard(name)
            crop_shard = ray.train.get_dataset_shard(name + "_crop")
            # The cache's one-off cost: read the shard once (what epoch 1 pays on top).
            t = time.perf_counter()
            cache = TensorShard.load(shard)
            loads.setdefault(name, []).append(time.perf_counter() - t)
            x, y = cache.x, cache.y
            n = len(y)
            for bs in batches:
                def raw():
                    order = epoch_order(n, seed=0, epoch=rep, rank=0)
                    for i in range(0, n - bs + 1, bs):
                        idx = order[i : i + bs]
                        _crop_pair(x[idx], y[idx], patch, gen)

                def stream(seed=None, prefetch=2):
                    for xb, yb in iter_batches(shard, batch_size=bs, prefetch_batches=prefetch,
                                               device=cpu, pin_memory=False, drop_last=True,
                                               seed=seed):
                        _crop_pair(xb, yb, patch, gen)

                def mapcrop():
                    for _ in iter_batches(crop_shard, batch_size=bs, prefetch_batches=2,
                                          device=cpu, pin_memory=False, drop_last=True):
                        pass

                feed = ShardFeed(shard, batch_size=bs, device=cpu, cache=True, seed=0)
                feed.tensors = cache  # loaded above (timed as `load`)

                def cached():
                    for xb, yb in feed(rep + 1):
                        _crop_pair(xb, yb, patch, gen)

                runs = {"raw": raw, "stream": stream, "stream pf=1": lambda: stream(prefetch=1),
                        "stream pf=4": lambda: stream(prefetch=4),
                        "stream+shuf": lambda: stream(seed=rep),
                        "stream+mapcrop": mapcrop, "cached": cached}
                samples = (n // bs) * bs
                # Each method runs right after a raw epoch, and the pair's ratio is kept: two
                # neighbouring runs see about the same contention from other processes. Cached,
                # a few ms an epoch, is paired `inner` times per repetition.
                for method in METHODS[1:]:
                    for _ in range(config["inner"] if method == "cached" else 1):
                        t_raw, t_method = timed(raw), timed(runs[method])
                        times.setdefault((name, bs, "raw"), []).append((samples, t_raw))
                        times.setdefault((name, bs, method), []).append((samples, t_method))
                        pairs.setdefault((name, bs, method), []).append(t_raw / t_method)
    def flat(d: dict) -> dict:
        return {"|".join(map(str, k)): v for k, v in d.items()}

    return {"times": flat(times), "pairs": flat(pairs), "loads": loads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions instead of 7")
    args = parser.parse_args()
    reps = 3 if args.quick else 7

    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.1")
    import ray
    import ray.train
    from ray.train.torch import TorchTrainer

    from trainables.data.arrays import ArrayData
    from trainables.data.pipeline import data_config, to_ray_datasets

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        rng = np.random.default_rng(0)
        datasets = {}
        for name, (n, shape, patch, _) in WORKLOADS.items():
            x = rng.standard_normal((n, *shape), dtype=np.float32)
            # 2D: class ids. 3D: label volumes, as the unet3d workload has them (they travel
            # as uint8 tensor columns and are cropped with their images).
            y = rng.integers(0, 10, n) if len(shape) == 3 else \
                (rng.random((n, *shape)) > 0.8).astype(np.int64)
            data = ArrayData(x, y, x[:8], y[:8], 10, source=name)
            ds = to_ray_datasets(data)["train"]
            datasets[name] = ds
            # Crops in the pipeline must differ every epoch, so this one is re-run per epoch.
            datasets[name + "_crop"] = ds.map_batches(_crop_in_pipeline(patch), batch_size=None)
        with tempfile.TemporaryDirectory() as storage:
            trainer = TorchTrainer(
                _bench_worker,
                train_loop_config={"reps": reps, "inner": 5, "workloads": WORKLOADS},
                scaling_config=ray.train.ScalingConfig(num_workers=1,
                                                       resources_per_worker={"CPU": 1}),
                datasets=datasets,
                dataset_config=data_config(),  # as in trainables.trial
                run_config=ray.train.RunConfig(storage_path=storage, name="data_pipeline"),
            )
            result = trainer.fit()
        out = result.return_value
    finally:
        ray.shutdown()
    print_table(out, reps)


def print_table(out: dict, reps: int) -> None:
    def unflat(d: dict) -> dict:
        return {tuple(k.split("|")): v for k, v in d.items()}

    times, pairs = unflat(out["times"]), unflat(out["pairs"])
    print(f"\nmedians of {reps} repetitions ({reps * 5} for cached), each epoch paired with a raw "
          "epoch run just before it, inside one Ray Train worker (1 CPU)\n")
    print("| workload | batch | method | samples/s | ratio to raw | overhead us/batch |")
    print("|---|---|---|---|---|---|")
    for name, (n, shape, patch, batches) in WORKLOADS.items():
        for bs in batches:
            key = (name, str(bs))
            raw = statistics.median(s / t for s, t in times[(*key, "raw")])
            for m in METHODS:
                rate = statistics.median(s / t for s, t in times[(*key, m)])
                ratio = 1.0 if m == "raw" else statistics.median(pairs[(*key, m)])
                over = (1 / ratio - 1) * bs / raw * 1e6
                print(f"| {name} {n}x{'x'.join(map(str, shape))} p{patch} | {bs} | {m} | "
                      f"{rate:,.0f} | {ratio:.2f} | {over:,.0f} |")
    print("\none-off read of the shard into tensors (cached, paid once in epoch 1):")
    for name, loads in out["loads"].items():
        n = WORKLOADS[name][0]
        med = statistics.median(loads)
        print(f"- {name}: {med * 1e3:.1f} ms median ({n / med:,.0f} samples/s)")


if __name__ == "__main__":
    main()
