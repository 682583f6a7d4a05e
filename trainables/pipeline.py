"""The Ray Data in-memory pipeline: arrays -> object store (once per search) -> worker shards.

The driver turns the arrays into Arrow tables with fixed-shape tensor columns and materializes
them in the object store once; every trial gets references to the same blocks. Inside a Train
worker, `ray.train.get_dataset_shard` gives this worker's share and `iter_torch_batches` yields
zero-copy torch batches, prefetched by a background thread.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import torch

from trainables.datasets import ArrayData

# Rows per Arrow block. Few large blocks keep per-block scheduling overhead off the hot path;
# many small ones shard more evenly across workers. 1024 rows of 32x32 float32 = 4 MiB.
BLOCK_ROWS = 1024


def _table(x: np.ndarray, y: np.ndarray) -> pa.Table:
    from ray.data.extensions import ArrowTensorArray

    return pa.table({"x": ArrowTensorArray.from_numpy(x), "y": pa.array(y)})


def to_ray_datasets(data: ArrayData, block_rows: int = BLOCK_ROWS) -> dict:
    """Materialized Ray datasets {'train', 'val'} built from in-memory arrays, in Arrow blocks."""
    import ray.data

    datasets = {}
    for name, x, y in (("train", data.x_train, data.y_train), ("val", data.x_val, data.y_val)):
        blocks = [
            _table(x[i : i + block_rows], y[i : i + block_rows])
            for i in range(0, len(x), block_rows)
        ]
        datasets[name] = ray.data.from_arrow(blocks).materialize()
    return datasets


def iter_batches(
    shard,
    *,
    batch_size: int,
    prefetch_batches: int,
    device: torch.device,
    pin_memory: bool,
    drop_last: bool,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(x, y) torch batches from a worker's dataset shard.

    pin_memory only means something with CUDA: page-locked host buffers let the copy to the GPU be
    non-blocking, so the next batch uploads while this one computes.
    """
    pin = pin_memory and device.type == "cuda"
    for batch in shard.iter_torch_batches(
        batch_size=batch_size,
        prefetch_batches=prefetch_batches,
        drop_last=drop_last,
        device="cpu",
        pin_memory=pin,
    ):
        x, y = batch["x"], batch["y"]
        if device.type != "cpu":
            x = x.to(device, non_blocking=pin)
            y = y.to(device, non_blocking=pin)
        yield x, y
