"""The Ray Train side: one worker process of a trial, adapting `loop.fit` to Ray.

Runs on every data-parallel worker. Batches come from this worker's Ray Data shard; metrics go
out through `ray.train.report` (every rank must call it: it is a barrier) and reach Tune through
the trial's TuneReportCallback.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

import torch

from trainables.config import TrialConfig
from trainables.loop import LoopIO, fit
from trainables.models import DataMeta
from trainables.pipeline import iter_batches

CHECKPOINT_FILE = "state.pt"


def loop_config(cfg: TrialConfig, meta: DataMeta, n_train: int, cpus_per_worker: float,
                model_builder=None) -> dict:
    """The picklable dict a TorchTrainer hands to every worker."""
    return {
        "trial": cfg.to_dict(),
        "meta": dataclasses.asdict(meta),
        "n_train": n_train,
        "threads": max(1, int(cpus_per_worker)),
        "model_builder": model_builder,
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

    def save_checkpoint(state: dict, metrics: dict) -> None:
        # Every rank reports (a barrier); rank 0 alone writes, the others' state is identical.
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if ctx.get_world_rank() == 0:
                torch.save(state, os.path.join(tmp, CHECKPOINT_FILE))
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report(metrics, checkpoint=checkpoint)

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
        report=lambda metrics: ray.train.report(metrics),
        all_reduce=all_reduce,
        wrap_model=ray.train.torch.prepare_model,
        device=device,
        world_size=world,
        save_checkpoint=save_checkpoint,
        load_checkpoint=load_checkpoint,
        rank=ctx.get_world_rank(),
        model_builder=config.get("model_builder"),
    )
    if cfg.loop == "legacy":
        from trainables.legacy import fit_legacy

        # The legacy loop reads this worker's shard into tensors and serves it through a
        # DataLoader with worker processes, as the seeds' "before" code did.
        parts = list(iter_batches(train_shard, batch_size=1024, prefetch_batches=0,
                                  device=torch.device("cpu"), pin_memory=False, drop_last=False))
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        return fit_legacy(cfg, meta, io, x, y)
    return fit(cfg, meta, io)
