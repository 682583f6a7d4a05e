"""Validation, for any task: the loop's inference over the held-out set, the task's loss and score.

How a batch is seen follows the data, as training's crops do: images and signals are cut to
their centre patch (validation sees what training saw: patches of one size); a volume with
voxel labels is inferred whole, from half-overlapping windows (`sliding_window`). The task then
scores what the model returned (`Task.score`), averaged or summed over the set as it says
(trainables/loop/task.py).

Rank 0 scores the whole validation set (it is not split across workers); the others add
zeros, so the all-reduce hands everyone rank 0's sums. One host sync at the end.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from trainables.data.crops import center_crop
from trainables.loop.task import finish, reduction


@torch.no_grad()
def validate(model: nn.Module, task, batches, size: int | None, kind: str, autocast,
             all_reduce, memory_format, device, is_rank0: bool) -> dict:
    """{'val_loss', 'val_score', and (rank 0's) the task's details} over `batches()`."""
    score, loss, details = 0.0, 0.0, {}
    if is_rank0:
        score, loss, details = _scored(model, task, batches, size, kind, autocast,
                                       memory_format, device)
    # Every rank decides alike (early stopping reads the score): rank 0's, to all.
    both = all_reduce(torch.tensor([score, loss], device=device, dtype=torch.float64)).tolist()
    return {"val_loss": both[1], **details, "val_score": both[0]}


def _scored(model, task, batches, size, kind, autocast, memory_format, device
            ) -> tuple[float, float, dict]:
    # Sums stay on the device: reading them is a host sync, paid once, at the end.
    loss_sum = torch.zeros((), device=device, dtype=torch.float64)
    count, total = 0, None
    for x, y in batches():
        for inputs, outputs, labels in _inferred(model, x, y, size, kind, autocast,
                                                 memory_format):
            batch, n = (inputs, labels), len(labels)
            loss_sum += task.loss(outputs.float(), batch).detach().double() * n
            part = torch.as_tensor(task.score(outputs, batch)).to(device, torch.float64)
            part = part if reduction(task) == "sum" else part * n
            total = part if total is None else total + part
            count += n
    if total is None:
        return 0.0, float("nan"), {}
    score, details = finish(task, total.cpu(), count)
    return score, loss_sum.item() / max(count, 1), details


def _inferred(model, x, y, size, kind: str, autocast, memory_format):
    """(inputs, outputs, labels) of one validation batch: a batch of centre patches, or each
    volume of a batch of volumes whole."""
    if kind == "segment":
        for i in range(len(x)):
            yield x[i:i + 1], sliding_window(model, x[i:i + 1], size, autocast,
                                             memory_format), y[i:i + 1]
        return
    inputs = center_crop(x, size).contiguous(memory_format=memory_format)
    with autocast():
        outputs = model(inputs)
    yield inputs, outputs, y


def window_starts(extent: int, size: int) -> list[int]:
    """Window origins every size/2, the last one flush with the end (covers every voxel)."""
    if size >= extent:
        return [0]
    starts = list(range(0, extent - size + 1, max(1, size // 2)))
    return starts if starts[-1] == extent - size else starts + [extent - size]


def sliding_window(model: nn.Module, volume: torch.Tensor, size: int | None,
                   autocast=contextlib.nullcontext, memory_format=torch.contiguous_format,
                   windows_per_batch: int = 32) -> torch.Tensor:
    """Logits for a whole (1, C, D, H, W) volume from half-overlapping windows, averaged.

    Windows run through the model in batches: one forward per window would pay the per-call
    overhead hundreds of times per volume.
    """
    _, _, d, h, w = volume.shape
    size = size or max(d, h, w)
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
