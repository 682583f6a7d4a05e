"""What is being learned: how a batch is cropped, what the loss is, how validation scores.

A task is a tiny strategy object so that one training loop serves classification and
segmentation. Every task reports `val_score` (what objectives rank on) besides its own metrics.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from trainables.data.crops import center_crop, random_crop


class ClassifyTask:
    """Image classification: x (N, C, H, W), y (N,) class ids; score = accuracy."""

    name = "classify"

    def crop(self, x, y, size: int, gen: torch.Generator):
        return random_crop(x, size, gen), y

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y)

    @torch.no_grad()
    def validate(self, model: nn.Module, batches, size: int, autocast, all_reduce,
                 memory_format, device, is_rank0: bool) -> dict:
        # Rank 0 scores the whole validation set (it is not split across workers); the others
        # add zeros, so the all-reduce hands everyone rank 0's sums. One host sync at the end.
        sums = torch.zeros(3, device=device)  # loss sum, correct, count
        for x, y in (batches() if is_rank0 else ()):
            x = center_crop(x, size).contiguous(memory_format=memory_format)
            with autocast():
                logits = model(x)
            sums[0] += F.cross_entropy(logits.float(), y, reduction="sum")
            sums[1] += (logits.argmax(1) == y).sum()
            sums[2] += len(y)
        loss_sum, correct, count = all_reduce(sums).tolist()
        acc = correct / max(count, 1)
        return {"val_loss": loss_sum / max(count, 1), "val_accuracy": acc, "val_score": acc}


class SegmentTask:
    """Voxel segmentation: x (N, C, D, H, W), y (N, 1, D, H, W) labels; score = foreground Dice,
    from sliding-window inference over whole held-out volumes."""

    name = "segment"

    def crop(self, x, y, size: int, gen: torch.Generator):
        # One gather for image and labels together, so both get the same window.
        xy = random_crop(torch.cat([x, y.to(x.dtype)], 1), size, gen)
        return xy[:, : x.shape[1]], xy[:, x.shape[1]].long()

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y)

    @torch.no_grad()
    def validate(self, model: nn.Module, batches, size: int, autocast, all_reduce,
                 memory_format, device, is_rank0: bool) -> dict:
        # As for classification: rank 0 infers every validation volume, the others add zeros.
        sums = torch.zeros(5, device=device)  # tp, fp, fn, loss sum, voxels
        if is_rank0:
            for x, y in batches():
                for i in range(len(x)):
                    logits = sliding_window(model, x[i : i + 1], size, autocast, memory_format)
                    # Labels may arrive as uint8 (how label volumes travel): the loss wants int64.
                    pred, truth = logits.argmax(1), y[i].long()
                    sums[0] += ((pred == 1) & (truth == 1)).sum()
                    sums[1] += ((pred == 1) & (truth != 1)).sum()
                    sums[2] += ((pred != 1) & (truth == 1)).sum()
                    sums[3] += F.cross_entropy(logits, truth, reduction="sum")
                    sums[4] += truth.numel()
        tp, fp, fn, loss_sum, voxels = all_reduce(sums).tolist()
        dice = 2 * tp / max(2 * tp + fp + fn, 1)
        iou = tp / max(tp + fp + fn, 1)
        return {"val_loss": loss_sum / max(voxels, 1), "val_dice": dice, "val_iou": iou,
                "val_score": dice}


def window_starts(extent: int, size: int) -> list[int]:
    """Window origins every size/2, the last one flush with the end (covers every voxel)."""
    if size >= extent:
        return [0]
    starts = list(range(0, extent - size + 1, max(1, size // 2)))
    return starts if starts[-1] == extent - size else starts + [extent - size]


def sliding_window(model: nn.Module, volume: torch.Tensor, size: int,
                   autocast=contextlib.nullcontext, memory_format=torch.contiguous_format,
                   windows_per_batch: int = 32) -> torch.Tensor:
    """Logits for a whole (1, C, D, H, W) volume from half-overlapping windows, averaged.

    Windows run through the model in batches: one forward per window would pay the per-call
    overhead hundreds of times per volume.
    """
    _, _, d, h, w = volume.shape
    origins = [(i, j, k) for i in window_starts(d, size) for j in window_starts(h, size)
               for k in window_starts(w, size)]
    out = None
    weight = torch.zeros((1, 1, d, h, w), device=volume.device)
    for b in range(0, len(origins), windows_per_batch):
        group = origins[b : b + windows_per_batch]
        wins = torch.cat([volume[:, :, i : i + size, j : j + size, k : k + size]
                          for i, j, k in group])
        with autocast():
            logits = model(wins.contiguous(memory_format=memory_format)).float()
        if out is None:
            out = torch.zeros((1, logits.shape[1], d, h, w), device=volume.device)
        for n, (i, j, k) in enumerate(group):
            out[0, :, i : i + size, j : j + size, k : k + size] += logits[n]
            weight[0, :, i : i + size, j : j + size, k : k + size] += 1
    return out / weight


TASKS = {"classify": ClassifyTask, "segment": SegmentTask}


def make_task(name: str):
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    return TASKS[name]()
