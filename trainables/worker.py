"""The Ray Train side: one worker process of a trial, adapting `loop.fit` to Ray.

Runs on every data-parallel worker. Batches come from this worker's Ray Data shard; metrics go
out through `ray.train.report` (every rank must call it: it is a barrier) and reach Tune through
the trial's TuneReportCallback.
"""

from __future__ import annotations

import os
import tempfile

import torch

from trainables.config import TrialConfig
from trainables.loop import LoopIO, fit
from trainables.models import DataMeta
from trainables.pipeline import iter_batches

CHECKPOINT_FILE = "state.pt"


def loop_config(cfg: TrialConfig, meta: DataMeta, n_train: int, cpus_per_worker: float) -> dict:
    """The picklable dict a TorchTrainer hands to every worker."""
    return {
        "trial": cfg.to_dict(),
        "meta": {"in_channels": meta.in_channels, "num_classes": meta.num_classes},
        "n_train": n_train,
        "threads": max(1, int(cpus_per_worker)),
    }


def train_loop_per_worker(config: dict) -> dict:
    import ray.train
    import ray.train.torch
    import torch.distributed as dist

    cfg = TrialConfig.from_dict(config["trial"])
    meta = DataMeta(**config["meta"])
    # Each worker owns `threads` cores; more intra-op threads than cores only adds contention.
    torch.set_num_threads(config["threads"])
    ctx = ray.train.get_context()
    world = ctx.get_world_size()
    device = ray.train.torch.get_device()

    train_shard = ray.train.get_dataset_shard("train")
    val_shard = ray.train.get_dataset_shard("val")
    batch = cfg.per_worker_batch
    # drop_last keeps every step's shape fixed (cuDNN benchmark, compile) and every worker's step
    # count equal (a DDP requirement).
    steps = config["n_train"] // world // batch

    def batches(shard, drop_last):
        return iter_batches(shard, batch_size=batch, prefetch_batches=cfg.prefetch_batches,
                            device=device, pin_memory=cfg.pin_memory, drop_last=drop_last)

    def all_reduce(t: torch.Tensor) -> torch.Tensor:
        if world > 1:
            dist.all_reduce(t)
        return t

    # Nodes this trial's workers run on: shows the placement strategy. Ray node ids, not Train's
    # node ranks (those group workers by IP address, which simulated nodes share).
    node_ids = [ray.get_runtime_context().get_node_id()] * world
    if world > 1:
        dist.all_gather_object(node_ids, node_ids[0])
    nodes = len(set(node_ids))

    def report(metrics: dict, checkpoint=None) -> None:
        ray.train.report({**metrics, "nodes": nodes}, checkpoint=checkpoint)

    def save_checkpoint(state: dict, metrics: dict) -> None:
        # Every rank reports (a barrier); rank 0 alone writes, the others' state is identical.
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if ctx.get_world_rank() == 0:
                torch.save(state, os.path.join(tmp, CHECKPOINT_FILE))
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            report(metrics, checkpoint=checkpoint)

    def load_checkpoint() -> dict | None:
        checkpoint = ray.train.get_checkpoint()
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as folder:
            # weights_only: tensors and plain values only, never arbitrary unpickling.
            return torch.load(os.path.join(folder, CHECKPOINT_FILE), map_location=device,
                              weights_only=True)

    io = LoopIO(
        train_batches=lambda epoch: batches(train_shard, drop_last=True),
        val_batches=lambda: batches(val_shard, drop_last=False),
        steps_per_epoch=steps,
        report=report,
        all_reduce=all_reduce,
        wrap_model=ray.train.torch.prepare_model,
        device=device,
        world_size=world,
        save_checkpoint=save_checkpoint,
        load_checkpoint=load_checkpoint,
    )
    return fit(cfg, meta, io)
