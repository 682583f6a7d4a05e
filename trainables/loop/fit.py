"""The optimized training loop: one function, every speed technique a named switch.

`fit` knows nothing about Ray: it gets its task (what is trained: trainables/loop/task.py), its
batches, its reporter and its all-reduce through `LoopIO`, so the same loop runs inside a Ray
Train worker (`trainables.trial.worker`) and in a plain unit test. Read it top to bottom:
setup -> model -> optimizer -> epochs (train, validate, report); one optimizer step is
`TrainStep`.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import torch
from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.data.crops import crop_batch
from trainables.loop.io import LoopIO
from trainables.loop.memory import SavedTensorMeter
from trainables.loop.resume import why_not_continued
from trainables.loop.state import LoopState, epoch_metrics
from trainables.loop.switches import autocast, memory_format_for, sync
from trainables.loop.task import OptimizerConfig, optimizer_and_schedule, task_for
from trainables.loop.validate import validate
from trainables.status import TrialStatus

# Optimizer steps timed as warm-up (first kernels, allocator growth, compilation) and reported
# apart from steady-state throughput.
WARMUP_STEPS = 3


def fit(cfg: TrialConfig, meta: DataMeta, io: LoopIO) -> dict:
    """Train `cfg` and return the last reported metrics."""
    device = io.device
    # ---- setup ----------------------------------------------------------------------------------
    torch.manual_seed(cfg.seed)  # same init on every worker (DDP also broadcasts it)
    if device.type == "cuda":
        # cuDNN times each conv algorithm once per input shape and keeps the fastest; our crops
        # make every batch the same shape, so the search pays off from the second step.
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
        # peak_mem_mb is this trial's: a reused actor's earlier trials must not count.
        torch.cuda.reset_peak_memory_stats(device)
    memory_format = memory_format_for(cfg, meta)
    task = io.task or task_for(cfg.workload, meta.task)  # what is trained: yours or built-in

    # ---- model ----------------------------------------------------------------------------------
    raw_model = task.model(cfg, meta).to(device, memory_format=memory_format)
    resume = io.load_checkpoint()
    if resume is not None and resume.get("continued") and \
            why_not_continued(cfg, resume, io.steps_per_epoch) is not None:
        resume = None  # another run's, not this one's first epochs: from scratch
    if resume is not None:
        raw_model.load_state_dict(resume["model"])  # before DDP/compile wrap their copies
    model = io.wrap_model(raw_model)
    if cfg.compile:
        # Fuses kernels; the first steps pay the compilation, reported in warmup_s.
        model = torch.compile(model, mode=cfg.compile_mode)

    # ---- optimizer, schedule, scaler, state -----------------------------------------------------
    step = TrainStep.build(cfg, model, io, task, meta.task, memory_format)
    st = LoopState()
    if resume is not None:
        step.load_state_dict(resume)
        st = LoopState.resumed(resume["state"], continued=bool(resume.get("continued")))

    metrics: dict = {}
    for epoch in range(st.epoch + 1, cfg.epochs + 1):
        metrics = run_epoch(cfg, meta, io, step, st, raw_model, epoch)
        if metrics["done"]:
            break
    return metrics


def run_epoch(cfg: TrialConfig, meta: DataMeta, io: LoopIO, step: TrainStep, st: LoopState,
              raw_model: nn.Module, epoch: int) -> dict:
    """Train one epoch, validate it (or skip it: `validates`), report it; its metrics."""
    # ---- train, then reduce across workers: one host sync per epoch -----------------------------
    loss_sum, micro, status = train_epoch(cfg, io, step, st, epoch)
    totals = io.all_reduce(
        torch.stack([loss_sum.float(), torch.tensor(float(micro), device=io.device)])).tolist()
    train_loss = totals[0] / max(totals[1], 1)
    if not math.isfinite(train_loss):
        status = TrialStatus.DIVERGED
    st.epoch = epoch

    # ---- validate -------------------------------------------------------------------------------
    if status is None and validates(cfg, epoch, train_loss):
        t_val = time.perf_counter()
        # The unwrapped model: no DDP collectives inside forward, so ranks may differ in work.
        raw_model.eval()
        st.val = validate(raw_model, step.task, io.val_batches, cfg.patch_size, meta.task,
                          lambda: autocast(cfg, io.device), io.all_reduce, step.memory_format,
                          io.device, io.rank == 0)
        step.model.train()
        st.eval_time += time.perf_counter() - t_val
        st.val_epoch = epoch
        if st.val["val_score"] > st.best_score:
            st.best_score, st.stale = st.val["val_score"], 0
        else:
            st.stale += 1
        if cfg.early_stop_patience and st.stale >= cfg.early_stop_patience:
            status = TrialStatus.EARLY_STOPPED

    # ---- report (with a checkpoint every `checkpoint_every` epochs) ----------------------------
    metrics = epoch_metrics(cfg, st, train_loss=train_loss, world_size=io.world_size,
                            lr=step.optimizer.param_groups[0]["lr"], device=io.device,
                            status=status)
    if io.save_checkpoint and cfg.checkpoint_every and epoch % cfg.checkpoint_every == 0:
        io.save_checkpoint({"model": raw_model.state_dict(), **step.state_dict(),
                            "state": st.to_dict(), "config": cfg.to_dict()}, metrics)
    else:
        io.report(metrics)
    return metrics


def validates(cfg: TrialConfig, epoch: int, train_loss: float) -> bool:
    """Whether `epoch` validates: every `val_every`-th and the last; under a loss gate
    (`val_skip_above_loss`), not while the training loss is above it before `val_skip_until` of
    the schedule. The loss is the all-reduced one, so every rank decides alike."""
    if epoch == cfg.epochs:
        return True
    if epoch % cfg.val_every:
        return False
    gate = cfg.val_skip_above_loss
    return gate is None or train_loss <= gate or epoch >= cfg.val_skip_until * cfg.epochs


def train_epoch(cfg: TrialConfig, io: LoopIO, step: TrainStep, st: LoopState,
                epoch: int) -> tuple[torch.Tensor, int, TrialStatus | None]:
    """One pass over this worker's shard: (loss sum on the device, micro-batches, status)."""
    step.model.train()
    # The running loss stays on the device: reading it (.item()) is a host sync, paid once per
    # `sync_every` steps or once per epoch, never per step.
    loss_sum = torch.zeros((), device=io.device)
    epoch_samples, micro, status = 0, 0, None
    t_epoch = t_fetch = time.perf_counter()
    for x, y in io.train_batches(epoch):
        st.data_wait += time.perf_counter() - t_fetch
        micro += 1
        last_micro = micro % cfg.accum_steps == 0 or micro == io.steps_per_epoch
        loss, n = step(x, y, last_micro)
        if last_micro:
            st.opt_steps += 1
            if st.opt_steps == WARMUP_STEPS:
                sync(io.device)
                st.warmup_s = time.perf_counter() - t_epoch + st.train_time
                st.warm_samples = st.samples + epoch_samples + n
        loss_sum += loss.detach()
        epoch_samples += n
        if cfg.sync_every and micro % cfg.sync_every == 0:
            if not math.isfinite(io.all_reduce(loss_sum.clone()).item()):
                status = TrialStatus.DIVERGED
                break
        t_fetch = time.perf_counter()
    sync(io.device)
    st.activation_mb = step.activation_mb or st.activation_mb
    st.train_time += time.perf_counter() - t_epoch
    st.samples += epoch_samples
    return loss_sum, micro, status


@dataclass
class TrainStep:
    """One micro-batch forward/backward, and an optimizer step on the last of `accum_steps`."""

    cfg: TrialConfig
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    """The task's schedule, stepped once per optimizer step; None: the task has none."""
    scaler: torch.amp.GradScaler
    task: object
    kind: str
    """The data's kind ('classify', 'segment'): how a batch is cropped."""
    memory_format: torch.memory_format
    device: torch.device
    crop_gen: torch.Generator
    activation_mb: float | None = None
    """Bytes autograd saved for backward in the first step's forward (`loop.memory`); None
    until measured."""

    @classmethod
    def build(cls, cfg: TrialConfig, model: nn.Module, io: LoopIO, task, kind: str,
              memory_format: torch.memory_format) -> TrainStep:
        # The task's optimizer, built with the lr scaled to this batch and the run's length.
        optimizer, scheduler = optimizer_and_schedule(
            task, list(model.parameters()), OptimizerConfig.of(cfg, io.steps_per_epoch))
        # fp16 has a narrow exponent: scale the loss so small gradients do not flush to zero.
        scaler = torch.amp.GradScaler(io.device.type, enabled=cfg.precision == "fp16-mixed")
        # Seeded by trial seed and rank: each worker draws its own crop positions, reproducibly.
        crop_gen = torch.Generator().manual_seed((cfg.seed * 1000 + 1) * 1009 + io.rank)
        return cls(cfg, model, optimizer, scheduler, scaler, task, kind, memory_format,
                   io.device, crop_gen)

    def __call__(self, x: torch.Tensor, y: torch.Tensor,
                 last_micro: bool) -> tuple[torch.Tensor, int]:
        cfg = self.cfg
        x, y = crop_batch(self.kind, x, y, cfg.patch_size, self.crop_gen)
        if hasattr(self.task, "augment"):  # on the device, inside the timed step
            x, y = self.task.augment((x, y))
        x = x.contiguous(memory_format=self.memory_format)
        no_sync = getattr(self.model, "no_sync", None)  # DDP: no all-reduce while accumulating
        accumulate = no_sync() if (no_sync and not last_micro) else contextlib.nullcontext()
        # Measured once: saved-tensor hooks cost a Python call per saved tensor (and are not
        # traced by torch.compile).
        measure = self.activation_mb is None and not cfg.compile
        meter = SavedTensorMeter() if measure else contextlib.nullcontext()
        with accumulate:
            with autocast(cfg, self.device), meter:  # the task's forward and loss, both
                loss = self.task.loss(self.model(x), (x, y))
            if measure:
                self.activation_mb = meter.mb
            # backward() sums into .grad, so scale each micro-batch's loss by 1/accum_steps.
            self.scaler.scale(loss / cfg.accum_steps).backward()
        if last_micro:
            self._optimizer_step()
        return loss, len(y)

    def _optimizer_step(self) -> None:
        if self.cfg.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)  # clip the real gradients, not scaled ones
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=self.cfg.zero_grad_set_to_none)
        if self.scheduler is not None:
            self.scheduler.step()

    def state_dict(self) -> dict:
        # The crop generator too: a run that goes on draws the crops the whole run would have.
        return {"optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict(),
                "crop_gen": self.crop_gen.get_state(),
                **({"scheduler": self.scheduler.state_dict()} if self.scheduler else {})}

    def load_state_dict(self, saved: dict) -> None:
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scaler.load_state_dict(saved["scaler"])
        if "crop_gen" in saved:
            self.crop_gen.set_state(saved["crop_gen"])
        if self.scheduler is not None and "scheduler" in saved:
            self.scheduler.load_state_dict(saved["scheduler"])
