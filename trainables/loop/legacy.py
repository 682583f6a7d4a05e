"""The legacy 'before' loop, a plain PyTorch loop with common habits, kept so every speedup has a baseline.

Same model, data, optimizer and schedule as `fit`, but with the habits the optimized loop removes:
fp32 only, a torch DataLoader with worker processes over in-memory data, blocking
host-to-device copies, `zero_grad()` writing zeros, a per-batch tqdm progress bar, and two
`.item()` host syncs per batch. Do not "fix" anything here: it is the control group.
"""

from __future__ import annotations

import contextlib
import math
import time

import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.loop.fit import WARMUP_STEPS
from trainables.loop.io import LoopIO
from trainables.loop.lr import scaled_lr, schedule_multiplier
from trainables.loop.state import LoopState, epoch_metrics
from trainables.loop.tasks import make_task
from trainables.status import TrialStatus
from trainables.workloads import build_model


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
    device = io.device
    torch.manual_seed(cfg.seed)
    task = make_task(meta.task)
    fmt = torch.contiguous_format if "channels_last" not in enable or x.ndim not in (4, 5) \
        else torch.channels_last if x.ndim == 4 else torch.channels_last_3d
    raw_model = build_model(cfg, meta, io.model_builder).to(device, memory_format=fmt)
    model = io.wrap_model(raw_model)
    if "compile" in enable:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=scaled_lr(cfg),
                                  weight_decay=cfg.weight_decay)
    if "in_memory" in enable:
        loader = _in_memory_batches(x, y, cfg.per_worker_batch, cfg.seed)
    else:
        loader = DataLoader(
            TensorDataset(x, y), batch_size=cfg.per_worker_batch, shuffle=True, drop_last=True,
            num_workers=cfg.loader_workers, persistent_workers=False,
            generator=torch.Generator().manual_seed(cfg.seed),
        )
    sync = "no_host_sync" not in enable
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if "bf16" in enable \
        else contextlib.nullcontext
    total_steps = max(1, len(loader)) * cfg.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, schedule_multiplier(cfg, total_steps))
    crop_gen = torch.Generator().manual_seed(cfg.seed * 1000 + 1)

    # No data-wait timer in the legacy loop: its DataLoader hides the wait (reported as NaN).
    st = LoopState(data_wait=math.nan)
    metrics: dict = {}
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        losses: list[float] = []
        loss_sum = torch.zeros((), device=device)
        t0 = time.perf_counter()
        pbar = tqdm(loader, desc=f"epoch {epoch}", leave=False, mininterval=0) if sync else loader
        for xb, yb in pbar:
            xb, yb = xb.to(device), yb.to(device)  # blocking copies
            xb, yb = task.crop(xb, yb, cfg.patch_size, crop_gen)
            optimizer.zero_grad(set_to_none="set_to_none" in enable)  # legacy: writes zeros
            with autocast():
                loss = task.loss(model(xb.contiguous(memory_format=fmt)), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            if sync:
                losses.append(loss.item())  # host sync #1
                pbar.set_postfix(loss=f"{loss.item():.4f}")  # host sync #2, same value
            else:
                loss_sum += loss.detach()
            st.samples += len(yb)
            st.opt_steps += 1
            if st.opt_steps == WARMUP_STEPS:
                # One-off costs (DataLoader worker start, first kernels), as the optimized loop
                # measures them, so the full-run projection pays them once (issue 17.3).
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                st.warmup_s = time.perf_counter() - t0 + st.train_time
                st.warm_samples = st.samples
        if sync:
            pbar.close()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        st.train_time += time.perf_counter() - t0
        st.epoch = epoch
        train_loss = sum(losses) / max(len(losses), 1) if sync else \
            loss_sum.item() / max(len(loader), 1)

        t_val = time.perf_counter()
        raw_model.eval()
        st.val = task.validate(raw_model, io.val_batches, cfg.patch_size, autocast,
                               io.all_reduce, fmt, device, io.rank == 0)
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
                                lr=optimizer.param_groups[0]["lr"], device=device, status=status)
        io.report(metrics)
        if metrics["done"]:
            break
    return metrics
