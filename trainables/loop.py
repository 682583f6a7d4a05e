"""The optimized training loop: one function, every speed technique a named switch.

`fit` knows nothing about Ray: it gets its batches, its reporter and its all-reduce through
`LoopIO`, so the same loop runs inside a Ray Train worker (`trainables.worker`) and in a plain
unit test. Read it top to bottom: setup -> model -> optimizer -> epochs (train, validate, report).
"""

from __future__ import annotations

import contextlib
import math
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from trainables.config import TrialConfig
from trainables.models import DataMeta, ModelBuilder, build_model
from trainables.schedules import lr_multiplier
from trainables.tasks import make_task

Batches = Iterable[tuple[torch.Tensor, torch.Tensor]]

# Optimizer steps timed as warm-up (first kernels, allocator growth, compilation) and reported
# apart from steady-state throughput.
WARMUP_STEPS = 3

# Trial statuses reported in metrics (the driver adds pruned / infeasible / failed).
COMPLETED, DIVERGED, EARLY_STOPPED = "completed", "diverged", "early_stopped"


def _identity(x):
    return x


@dataclass
class LoopIO:
    """Everything the loop needs from the outside world."""

    train_batches: Callable[[int], Batches]
    """epoch -> this worker's training batches (already on `device`)."""
    val_batches: Callable[[], Batches]
    """-> this worker's validation batches."""
    steps_per_epoch: int
    """Micro-batches per epoch on this worker (equal on every worker, or DDP would hang)."""
    report: Callable[[dict], None] = lambda metrics: None
    """Called once per epoch on every worker with the same, globally reduced metrics."""
    all_reduce: Callable[[torch.Tensor], torch.Tensor] = _identity
    """Sums a tensor over workers (identity for one process)."""
    wrap_model: Callable[[nn.Module], nn.Module] = _identity
    """Moves the model to its device and wraps it for data parallelism (DDP)."""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    world_size: int = 1
    """Data-parallel workers; shards are equal, so global samples = local samples x world_size."""
    save_checkpoint: Callable[[dict, dict], None] | None = None
    """(state, metrics) -> report the metrics with a checkpoint of `state` (replaces `report`)."""
    load_checkpoint: Callable[[], dict | None] = lambda: None
    """-> the last checkpoint's state after a restart, or None on a fresh start."""
    rank: int = 0
    model_builder: ModelBuilder | None = None
    """A user's own model builder (bring-your-own model); None uses `cfg.workload`."""


def autocast(cfg: TrialConfig, device: torch.device):
    """Mixed precision: matmuls/convs run in bf16 or fp16, reductions stay fp32."""
    if cfg.precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if cfg.precision == "bf16-mixed" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def memory_format_for(cfg: TrialConfig, meta: DataMeta) -> torch.memory_format:
    """channels_last (NHWC) for 2D, channels_last_3d (NDHWC) for 3D, else the default."""
    if not cfg.channels_last:
        return torch.contiguous_format
    return torch.channels_last_3d if meta.spatial_dims == 3 else torch.channels_last


def peak_memory_mb(device: torch.device) -> float:
    """CUDA: peak allocated by tensors. CPU: peak resident set size of this process."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _sync(device: torch.device) -> None:
    # Timers read the host clock: wait for queued GPU work so the time is the work's time.
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fit(cfg: TrialConfig, meta: DataMeta, io: LoopIO) -> dict:
    """Train `cfg` and return the last reported metrics."""
    device = io.device
    # ---- setup ----------------------------------------------------------------------------------
    torch.manual_seed(cfg.seed)  # same init on every worker (DDP also broadcasts it)
    if device.type == "cuda":
        # cuDNN times each conv algorithm once per input shape and keeps the fastest; our crops
        # make every batch the same shape, so the search pays off from the second step.
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    # Seeded by trial seed and rank: each worker draws its own crop positions, reproducibly.
    crop_gen = torch.Generator().manual_seed((cfg.seed * 1000 + 1) * 1009 + io.rank)
    memory_format = memory_format_for(cfg, meta)
    task = make_task(meta.task)

    # ---- model ----------------------------------------------------------------------------------
    raw_model = build_model(cfg, meta, io.model_builder).to(device, memory_format=memory_format)
    resume = io.load_checkpoint()
    if resume is not None:
        raw_model.load_state_dict(resume["model"])  # before DDP/compile wrap their copies
    model = io.wrap_model(raw_model)
    if cfg.compile:
        # Fuses kernels; the first steps pay the compilation, reported in warmup_s.
        model = torch.compile(model, mode=cfg.compile_mode)

    # ---- optimizer, schedule, scaler --------------------------------------------------------------
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    opt_steps_per_epoch = max(1, io.steps_per_epoch // cfg.accum_steps)
    total_opt_steps = opt_steps_per_epoch * cfg.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_multiplier(cfg.schedule, step, total_opt_steps)
    )
    # fp16 has a narrow exponent: scale the loss so small gradients do not flush to zero.
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16-mixed")
    no_sync = getattr(model, "no_sync", None)  # DDP: skip the all-reduce on accumulation steps

    # ---- state (everything a restarted worker needs to continue where the checkpoint was) ------
    st = {"epoch": 0, "train_time": 0.0, "eval_time": 0.0, "data_wait": 0.0, "warmup_s": 0.0,
          "warm_samples": 0, "samples": 0, "opt_steps": 0, "best_acc": -math.inf, "stale": 0,
          "restarts": 0, "val": {"val_loss": math.nan, "val_score": 0.0}}
    if resume is not None:
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        scaler.load_state_dict(resume["scaler"])
        st.update(resume["state"])
        st["restarts"] += 1
    train_time, eval_time, data_wait = st["train_time"], st["eval_time"], st["data_wait"]
    warmup_s, warm_samples = st["warmup_s"], st["warm_samples"]
    samples, opt_steps = st["samples"], st["opt_steps"]
    best_acc, stale_validations, val = st["best_acc"], st["stale"], st["val"]
    metrics: dict = {}

    for epoch in range(st["epoch"] + 1, cfg.epochs + 1):
        # ---- train one epoch ------------------------------------------------------------------------
        model.train()
        # The running loss stays on the device: reading it (.item()) is a host sync, paid once per
        # `sync_every` steps or once per epoch, never per step.
        loss_sum = torch.zeros((), device=device)
        epoch_samples, micro = 0, 0
        status = None
        t_epoch = t_fetch = time.perf_counter()
        for x, y in io.train_batches(epoch):
            data_wait += time.perf_counter() - t_fetch
            x, y = task.crop(x, y, cfg.patch_size, crop_gen)
            x = x.contiguous(memory_format=memory_format)
            micro += 1
            last_micro = micro % cfg.accum_steps == 0 or micro == io.steps_per_epoch
            accumulate = no_sync() if (no_sync and not last_micro) else contextlib.nullcontext()
            with accumulate:
                with autocast(cfg, device):
                    loss = task.loss(model(x), y)
                # backward() sums into .grad, so scale each micro-batch's loss by 1/accum_steps.
                scaler.scale(loss / cfg.accum_steps).backward()
            if last_micro:
                if cfg.grad_clip is not None:
                    scaler.unscale_(optimizer)  # clip the real gradients, not the scaled ones
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=cfg.zero_grad_set_to_none)
                scheduler.step()
                opt_steps += 1
                if opt_steps == WARMUP_STEPS:
                    _sync(device)
                    warmup_s = time.perf_counter() - t_epoch + train_time
                    warm_samples = samples + epoch_samples + len(y)
            loss_sum += loss.detach()
            epoch_samples += len(y)
            if cfg.sync_every and micro % cfg.sync_every == 0:
                if not math.isfinite(io.all_reduce(loss_sum.clone()).item()):
                    status = DIVERGED
                    break
            t_fetch = time.perf_counter()
        _sync(device)
        train_time += time.perf_counter() - t_epoch
        samples += epoch_samples

        # ---- reduce across workers: one host sync per epoch ----------------------------------------
        totals = io.all_reduce(
            torch.stack([loss_sum.float(), torch.tensor(float(micro), device=device)])
        ).tolist()
        train_loss = totals[0] / max(totals[1], 1)
        if not math.isfinite(train_loss):
            status = DIVERGED

        # ---- validate -------------------------------------------------------------------------------
        if status is None and (epoch % cfg.val_every == 0 or epoch == cfg.epochs):
            t_val = time.perf_counter()
            # The unwrapped model: no DDP collectives inside forward, so ranks may differ in work.
            raw_model.eval()
            val = task.validate(raw_model, io.val_batches, cfg.patch_size,
                                lambda: autocast(cfg, device), io.all_reduce, memory_format,
                                device, io.rank == 0)
            model.train()
            eval_time += time.perf_counter() - t_val
            if val["val_score"] > best_acc:
                best_acc, stale_validations = val["val_score"], 0
            else:
                stale_validations += 1
            if cfg.early_stop_patience and stale_validations >= cfg.early_stop_patience:
                status = EARLY_STOPPED
        done = status is not None or epoch == cfg.epochs
        if done and status is None:
            status = COMPLETED

        steady_time = train_time - warmup_s
        world = io.world_size
        metrics = {
            "epoch": epoch,
            "epochs_planned": cfg.epochs,
            "train_loss": train_loss,
            **val,
            "best_val_score": max(best_acc, 0.0),
            "train_time_s": train_time,
            "eval_time_s": eval_time,
            "samples": samples * world,
            "samples_per_s": samples * world / train_time if train_time else 0.0,
            "steady_samples_per_s": (
                (samples - warm_samples) * world / steady_time
                if warmup_s and steady_time > 0 else samples * world / max(train_time, 1e-9)
            ),
            "warmup_s": warmup_s,
            "data_wait_frac": data_wait / train_time if train_time else 0.0,
            "optimizer_steps": opt_steps,
            "lr": optimizer.param_groups[0]["lr"],
            "peak_mem_mb": peak_memory_mb(device),
            "restarts": st["restarts"],
            "status": status or "running",
            "done": done,
        }
        if status == DIVERGED:
            metrics["reason"] = f"loss became NaN or inf in epoch {epoch} ({cfg.precision})"
        if io.save_checkpoint and cfg.checkpoint_every and epoch % cfg.checkpoint_every == 0:
            state = {"epoch": epoch, "train_time": train_time, "eval_time": eval_time,
                     "data_wait": data_wait, "warmup_s": warmup_s, "warm_samples": warm_samples,
                     "samples": samples, "opt_steps": opt_steps, "best_acc": best_acc,
                     "stale": stale_validations, "restarts": st["restarts"], "val": val}
            io.save_checkpoint({"model": raw_model.state_dict(),
                                "optimizer": optimizer.state_dict(),
                                "scheduler": scheduler.state_dict(),
                                "scaler": scaler.state_dict(), "state": state}, metrics)
        else:
            io.report(metrics)
        if done:
            break
    return metrics
