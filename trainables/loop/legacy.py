"""The legacy 'before' loop, a plain PyTorch loop with common habits, kept so every speedup has a baseline.

Same task (model, loss, optimizer and schedule, score), data and schedule as `fit`, but with the
habits the optimized loop removes:
fp32 only, a torch DataLoader with worker processes over in-memory data, blocking
host-to-device copies, `zero_grad()` writing zeros, a per-batch tqdm progress bar, and two
`.item()` host syncs per batch. Do not "fix" anything here: it is the control group.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.data.crops import crop_batch
from trainables.loop.fit import WARMUP_STEPS
from trainables.loop.io import LoopIO
from trainables.loop.state import LoopState, epoch_metrics
from trainables.loop.task import OptimizerConfig, optimizer_and_schedule, task_for
from trainables.loop.validate import validate
from trainables.status import TrialStatus


# Techniques the ablation benchmark may turn on one at a time; none are on in `loop: legacy`.
TECHNIQUES = ("in_memory", "no_host_sync", "bf16", "channels_last", "compile", "set_to_none")


def _in_memory_batches(x, y, batch: int, seed: int):
    """Seeded randperm + index over tensors already in memory: no loader processes, no IPC."""
    gen = torch.Generator().manual_seed(seed)

    class Batches:
        def __len__(self):
            return len(x) // batch

        def __iter__(self):
            order = torch.randperm(len(x), generator=gen)
            for i in range(0, len(x) - batch + 1, batch):
                yield x[order[i : i + batch]], y[order[i : i + batch]]

    return Batches()


def fit_legacy(cfg: TrialConfig, meta: DataMeta, io: LoopIO, x: torch.Tensor,
               y: torch.Tensor, enable: frozenset[str] = frozenset()) -> dict:
    """Train on this worker's samples `x`, `y` (CPU tensors) the legacy way.

    `enable` turns single techniques on (benchmarks/loop_speedup.py's ablation); empty is the
    faithful baseline.
    """
    unknown = set(enable) - set(TECHNIQUES)
    if unknown:
        raise ValueError(f"unknown techniques {sorted(unknown)}; known: {TECHNIQUES}")
    run = LegacyRun.build(cfg, meta, io, x, y, enable)
    # No data-wait timer in the legacy loop: its DataLoader hides the wait (reported as NaN).
    st = LoopState(data_wait=math.nan)
    metrics: dict = {}
    for epoch in range(1, cfg.epochs + 1):
        train_loss = run.train_epoch(st, epoch)
        t_val = time.perf_counter()
        run.raw_model.eval()
        st.val = validate(run.raw_model, run.task, io.val_batches, cfg.patch_size, meta.task,
                          run.autocast, io.all_reduce, run.fmt, io.device, io.rank == 0)
        st.eval_time += time.perf_counter() - t_val
        st.val_epoch = epoch
        # Early stopping is when a run ends, not a speed habit: the baseline keeps the same rule.
        if st.val["val_score"] > st.best_score:
            st.best_score, st.stale = st.val["val_score"], 0
        else:
            st.stale += 1
        status = TrialStatus.DIVERGED if not math.isfinite(train_loss) else \
            TrialStatus.EARLY_STOPPED if cfg.early_stop_patience and \
            st.stale >= cfg.early_stop_patience else None
        metrics = epoch_metrics(cfg, st, train_loss=train_loss, world_size=io.world_size,
                                lr=run.optimizer.param_groups[0]["lr"], device=io.device,
                                status=status)
        io.report(metrics)
        if metrics["done"]:
            break
    return metrics


@dataclass
class LegacyRun:
    """The legacy loop's pieces: the task's model, optimizer and schedule, a DataLoader."""

    cfg: TrialConfig
    task: object
    kind: str
    raw_model: nn.Module
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: object
    loader: object
    fmt: torch.memory_format
    autocast: object
    sync: bool
    set_to_none: bool
    device: torch.device
    crop_gen: torch.Generator

    @classmethod
    def build(cls, cfg: TrialConfig, meta: DataMeta, io: LoopIO, x: torch.Tensor,
              y: torch.Tensor, enable: frozenset[str]) -> LegacyRun:
        device, task = io.device, io.task or task_for(cfg.workload, meta.task)
        torch.manual_seed(cfg.seed)
        fmt = torch.contiguous_format if "channels_last" not in enable or x.ndim not in (4, 5) \
            else torch.channels_last if x.ndim == 4 else torch.channels_last_3d
        raw_model = task.model(cfg, meta).to(device, memory_format=fmt)
        model = io.wrap_model(raw_model)
        if "compile" in enable:
            model = torch.compile(model)
        if "in_memory" in enable:
            loader = _in_memory_batches(x, y, cfg.per_worker_batch, cfg.seed)
        else:
            loader = DataLoader(
                TensorDataset(x, y), batch_size=cfg.per_worker_batch, shuffle=True,
                drop_last=True, num_workers=cfg.loader_workers, persistent_workers=False,
                generator=torch.Generator().manual_seed(cfg.seed))
        optimizer, scheduler = optimizer_and_schedule(
            task, list(model.parameters()), OptimizerConfig.of(cfg, max(1, len(loader))))
        autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) \
            if "bf16" in enable else contextlib.nullcontext
        return cls(cfg, task, meta.task, raw_model, model, optimizer, scheduler, loader, fmt,
                   autocast, "no_host_sync" not in enable, "set_to_none" in enable, device,
                   torch.Generator().manual_seed(cfg.seed * 1000 + 1))

    def train_epoch(self, st: LoopState, epoch: int) -> float:
        """One epoch the legacy way; its mean training loss."""
        self.model.train()
        losses: list[float] = []
        loss_sum = torch.zeros((), device=self.device)
        t0 = time.perf_counter()
        pbar = tqdm(self.loader, desc=f"epoch {epoch}", leave=False, mininterval=0) \
            if self.sync else self.loader
        for xb, yb in pbar:
            xb, yb = xb.to(self.device), yb.to(self.device)  # blocking copies
            xb, yb = crop_batch(self.kind, xb, yb, self.cfg.patch_size, self.crop_gen)
            if hasattr(self.task, "augment"):
                xb, yb = self.task.augment((xb, yb))
            self.optimizer.zero_grad(set_to_none=self.set_to_none)  # legacy: writes zeros
            with self.autocast():
                xb = xb.contiguous(memory_format=self.fmt)
                loss = self.task.loss(self.model(xb), (xb, yb))
            loss.backward()
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            if self.sync:
                losses.append(loss.item())  # host sync #1
                pbar.set_postfix(loss=f"{loss.item():.4f}")  # host sync #2, same value
            else:
                loss_sum += loss.detach()
            st.samples += len(yb)
            st.opt_steps += 1
            if st.opt_steps == WARMUP_STEPS:
                self._warm(st, t0)
        if self.sync:
            pbar.close()
        _sync(self.device)
        st.train_time += time.perf_counter() - t0
        st.epoch = epoch
        return sum(losses) / max(len(losses), 1) if self.sync else \
            loss_sum.item() / max(len(self.loader), 1)

    def _warm(self, st: LoopState, t0: float) -> None:
        """One-off costs (DataLoader worker start, first kernels), as the optimized loop
        measures them, so the full-run projection pays them once (issue 17.3)."""
        _sync(self.device)
        st.warmup_s = time.perf_counter() - t0 + st.train_time
        st.warm_samples = st.samples


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
