"""`LoopIO`: everything the training loop needs from the outside world.

The loop knows nothing about Ray: a Ray Train worker, the Tune trial process and a plain unit
test each hand it its task, batches, a reporter and an all-reduce through this one seam.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


Batches = Iterable[tuple[torch.Tensor, torch.Tensor]]


def identity(x):
    return x


@dataclass
class LoopIO:
    train_batches: Callable[[int], Batches]
    """epoch -> this worker's training batches (already on `device`)."""
    val_batches: Callable[[], Batches]
    """-> this worker's validation batches."""
    steps_per_epoch: int
    """Micro-batches per epoch on this worker (equal on every worker, or DDP would hang)."""
    report: Callable[[dict], None] = lambda metrics: None
    """Called once per epoch on every worker with the same, globally reduced metrics."""
    all_reduce: Callable[[torch.Tensor], torch.Tensor] = identity
    """Sums a tensor over workers (identity for one process)."""
    wrap_model: Callable[[nn.Module], nn.Module] = identity
    """Moves the model to its device and wraps it for data parallelism (DDP)."""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    world_size: int = 1
    """Data-parallel workers; shards are equal, so global samples = local samples x world_size."""
    save_checkpoint: Callable[[dict, dict], None] | None = None
    """(state, metrics) -> report the metrics with a checkpoint of `state` (replaces `report`)."""
    load_checkpoint: Callable[[], dict | None] = lambda: None
    """-> the last checkpoint's state after a restart, or None on a fresh start."""
    rank: int = 0
    task: Any = None
    """What is trained (trainables/loop/task.py): your task, or your model with the built-in
    rest; None: the built-in task of `cfg.workload` and the data's kind."""
