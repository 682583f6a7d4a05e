"""The Ray Data in-memory pipeline: arrays -> object store (once per search) -> worker shards.

The driver turns the arrays into Arrow tables with fixed-shape tensor columns and materializes
them in the object store once; every trial gets references to the same blocks. Inside a Train
worker, `worker_data` gives this worker's share (see below), and `ShardFeed` serves it to
the loop in one of two ways (`TrialConfig.cache_shard`):
- cached (default): the shard is read once, whole blocks at a time, into tensors in the worker's
  memory (`trainables.data.shard_cache`); every epoch is then a seeded randperm over them, at about
  the speed of indexing in-memory tensors;
- streamed: every epoch goes through `iter_torch_batches` again (prefetched by a background
  thread), shuffled by a seeded local buffer; 0.1-0.35x of raw speed here.
Both serve every sample of the shard once per epoch, in an order fixed by the seed.
Numbers: docs/benchmarks.md, "Data pipeline (issue 4)".

A worker group's shares are cut on the driver, once per search, for every worker count the
search can train with (`worker_counts`): rank r of n workers reads the r-th of n equal,
contiguous slices of the training set (`equal_shares`). Ray Train's own split (`data_config`:
a streaming split coordinator per trial, behind Ray Train's dataset manager) cost ~2 s of a
2-worker trial's ~13 s here (docs/benchmarks.md, "Worker groups read pre-cut shares"), and it
cannot be cut inside a trial instead: its Ray tasks would wait for the CPUs that the trial's own
placement group holds. Each worker count costs one more copy of the training set in the object
store of the driver's node, so shares are cut only while all of them fit in PRESPLIT_SHARE of
it; past that, and for a worker count not cut, trials split through Ray Train as before
(`group_datasets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from trainables.data.arrays import ArrayData
from trainables.data.shard_cache import TensorShard, shuffle_seed

# Rows per Arrow block. Few large blocks keep per-block scheduling overhead off the hot path;
# many small ones shard more evenly across workers. 1024 rows of 32x32 float32 = 4 MiB.
BLOCK_ROWS = 1024
# ...but at most this many bytes a block: 1024 rows of 32^3 volumes would be 160 MiB a block, and
# a 100-row set would be one block that only one worker of a split can get.
BLOCK_BYTES = 4 * 2**20
# Rows of the streamed path's local shuffle buffer: a block's worth mixes across block borders.
SHUFFLE_BUFFER_ROWS = 1024
# At most this share of the object store goes to the training set's pre-cut copies (one per
# worker count above 1); the rest stays for the blocks every trial shares and for what trials put.
PRESPLIT_SHARE = 0.25


def _column(a: np.ndarray) -> pa.Array:
    """One value per row (class ids) as a plain column; anything shaped (label volumes, images)
    as a fixed-shape tensor column, which batches give back with its shape."""
    from ray.data.extensions import ArrowTensorArray

    return pa.array(a) if a.ndim == 1 else ArrowTensorArray.from_numpy(np.ascontiguousarray(a))


def labels_for_table(y: np.ndarray) -> np.ndarray:
    """Label volumes travel as uint8 when their ids fit: 8x less object store and copying than
    int64 (the loss casts them back to int64 after cropping). Class ids stay as they are."""
    if y.ndim > 1 and y.size and 0 <= y.min() and y.max() < 256:
        return y.astype(np.uint8)
    return y


def _table(x: np.ndarray, y: np.ndarray) -> pa.Table:
    return pa.table({"x": _column(x), "y": _column(labels_for_table(y))})


def _row_bytes(x: np.ndarray, y: np.ndarray) -> int:
    """Bytes of one row in the object store (image and its labels, as they travel)."""
    return max(1, x[:1].nbytes + labels_for_table(y[:1]).nbytes)


def block_rows_for(x: np.ndarray, y: np.ndarray, block_rows: int = BLOCK_ROWS) -> int:
    """Rows per block: `block_rows`, fewer when rows are big (volumes), so blocks stay near
    BLOCK_BYTES and a small set of big rows still splits into several blocks."""
    return max(1, min(block_rows, BLOCK_BYTES // _row_bytes(x, y)))


def _materialized(x: np.ndarray, y: np.ndarray, block_rows: int | None):
    import ray.data

    rows = block_rows or block_rows_for(x, y)
    blocks = [_table(x[i : i + rows], y[i : i + rows]) for i in range(0, len(x), rows)]
    # from_blocks keeps these blocks as they are and reads their row counts and schema here;
    # from_arrow would ask a Ray task for them (~0.6 s a dataset in a fresh worker).
    dataset = ray.data.from_blocks(blocks).materialize()
    # Read in block order wherever it is read (a worker's share, the one-worker trial's whole
    # set): otherwise blocks come in the order they are ready, and a seeded shuffle buffer gives
    # another sample order every run (see `data_config`).
    dataset.context.execution_options.preserve_order = True
    return dataset


def equal_shares(n_rows: int, world: int) -> list[slice]:
    """Rank r's rows of `n_rows` among `world` workers: equal contiguous slices, the last
    `n_rows % world` rows dropped, as Ray Train's equal split drops them (equal step counts keep
    the workers' all-reduces in step)."""
    size = n_rows // world
    return [slice(rank * size, (rank + 1) * size) for rank in range(world)]


def to_ray_datasets(data: ArrayData, block_rows: int | None = None,
                    worker_counts: Iterable[int] = ()) -> dict:
    """Materialized Ray datasets {'train', 'val'} built from in-memory arrays, in Arrow blocks
    (`block_rows` rows each; default: BLOCK_ROWS, capped at BLOCK_BYTES a block), and
    'shares': {n: [rank 0's training rows, ..., rank n-1's]} for each of `worker_counts` above
    1, while their copies fit in PRESPLIT_SHARE of this node's object store (module docstring)."""
    datasets = {"train": _materialized(data.x_train, data.y_train, block_rows),
                "val": _materialized(data.x_val, data.y_val, block_rows), "shares": {}}
    counts = sorted({int(n) for n in worker_counts if int(n) > 1})
    copies = _row_bytes(data.x_train, data.y_train) * len(data.x_train) * len(counts)
    if counts and copies <= PRESPLIT_SHARE * _object_store_here():
        for n in counts:
            datasets["shares"][n] = [
                _materialized(data.x_train[rows], data.y_train[rows], block_rows)
                for rows in equal_shares(len(data.x_train), n)]
    return datasets


def _object_store_here() -> float:
    """Bytes of object store on this process's node: where the blocks it puts are held (on a
    cluster, the head's, whatever the other nodes have)."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node["NodeID"] == here:
            return float(node["Resources"].get("object_store_memory", 0))
    return 0.0


def group_datasets(datasets: dict, workers: int) -> tuple[dict, dict]:
    """What a group of `workers` Train workers reads its data from: (the TorchTrainer's
    `datasets`, entries for its loop config). With shares cut for this worker count, the workers
    get them in their config and Ray Train splits nothing; otherwise Ray Train splits the
    training set (`data_config`). `worker_data` reads either on the worker."""
    shares = datasets.get("shares", {}).get(workers)
    if shares:
        return {}, {"shares": shares, "val": datasets["val"]}
    return {"train": datasets["train"], "val": datasets["val"]}, {}


def worker_data(config: dict):
    """(this worker's training rows, the validation set) inside a Train worker, from what
    `group_datasets` gave its group."""
    import ray.train

    if "shares" in config:
        return config["shares"][ray.train.get_context().get_world_rank()], config["val"]
    return ray.train.get_dataset_shard("train"), ray.train.get_dataset_shard("val")


def data_config():
    """Ray Train's DataConfig for our datasets: Train's default ingest options, plus
    preserve_order.

    Without preserve_order, which blocks reach which worker, and in which order, depends on
    timing: the same seed would give another sample order on every run (measured in
    tests/trainables/test_pipeline.py). With it, the split of a materialized dataset is fixed.
    """
    import ray.train

    options = ray.train.DataConfig.default_ingest_options()
    options.preserve_order = True
    return ray.train.DataConfig(datasets_to_split=["train"], execution_options=options)


def iter_batches(
    shard,
    *,
    batch_size: int,
    prefetch_batches: int,
    device: torch.device,
    pin_memory: bool,
    drop_last: bool,
    seed: int | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(x, y) torch batches from a worker's dataset shard, streamed through Ray Data.

    pin_memory only means something with CUDA: page-locked host buffers let the copy to the GPU be
    non-blocking, so the next batch uploads while this one computes. With a `seed`, rows pass
    through a local shuffle buffer seeded by it: each row still comes out exactly once.
    """
    pin = pin_memory and device.type == "cuda"
    shuffle: dict[str, Any] = {}
    if seed is not None:
        shuffle = {"local_shuffle_buffer_size": max(SHUFFLE_BUFFER_ROWS, batch_size),
                   "local_shuffle_seed": seed}
    for batch in shard.iter_torch_batches(
        batch_size=batch_size,
        prefetch_batches=prefetch_batches,
        drop_last=drop_last,
        device="cpu",
        pin_memory=pin,
        **shuffle,
    ):
        x, y = batch["x"], batch["y"]
        if device.type != "cpu":
            x = x.to(device, non_blocking=pin)
            y = y.to(device, non_blocking=pin)
        yield x, y


class ShardFeed:
    """epoch -> this worker's batches of its shard, cached as tensors or streamed (see above).

    The cache is filled by `load`, which a trial calls before its clock starts (the legacy
    baseline reads its shard before its clock too); otherwise on the first call.
    """

    def __init__(self, shard, *, batch_size: int, device: torch.device, cache: bool,
                 prefetch_batches: int = 2, pin_memory: bool = True, shuffle: bool = True,
                 drop_last: bool = True, seed: int = 0, rank: int = 0):
        self.shard, self.batch_size, self.device, self.cache = shard, batch_size, device, cache
        self.prefetch_batches, self.pin_memory = prefetch_batches, pin_memory
        self.shuffle, self.drop_last, self.seed, self.rank = shuffle, drop_last, seed, rank
        self.tensors: TensorShard | None = None

    def load(self) -> None:
        """Read a cached shard into memory now; a streamed feed has nothing to read ahead."""
        if self.cache and self.tensors is None:
            self.tensors = TensorShard.load(self.shard, prefetch_batches=self.prefetch_batches,
                                            device=self.device)

    def __call__(self, epoch: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if not self.cache:
            seed = shuffle_seed(self.seed, epoch, self.rank) if self.shuffle else None
            return iter_batches(self.shard, batch_size=self.batch_size,
                                prefetch_batches=self.prefetch_batches, device=self.device,
                                pin_memory=self.pin_memory, drop_last=self.drop_last, seed=seed)
        self.load()
        if not self.shuffle:
            return self.tensors.in_order(self.batch_size, device=self.device,
                                         drop_last=self.drop_last)
        return self.tensors.epoch(self.batch_size, seed=self.seed, epoch=epoch, rank=self.rank,
                                  device=self.device, drop_last=self.drop_last)
