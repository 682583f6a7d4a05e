"""A worker's shard held as tensors: one pass through Ray Data, then seeded-randperm epochs.

Why: for data that fits in memory, Ray Data's per-batch machinery (block slicing, Arrow ->
numpy -> torch conversion, the prefetch thread) costs tens of microseconds per batch, which at
small batches is most of the time the loop waits (docs/benchmarks.md, "Data pipeline"). Reading
the shard once, block by block, and then indexing tensors runs at the speed of plain
in-memory indexing, and gives a fresh, seeded shuffle every epoch for free.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

# Keep the cached shard on the GPU when it takes at most this share of free device memory:
# batches are then gathered on the device and no host-to-device copy happens per step.
DEVICE_CACHE_FRACTION = 0.5


def shuffle_seed(seed: int, epoch: int, rank: int) -> int:
    """A well-mixed 32-bit seed for (search seed, epoch, worker rank): no two epochs alike."""
    return int(np.random.SeedSequence([seed, epoch, rank]).generate_state(1)[0])


def epoch_order(n: int, *, seed: int, epoch: int, rank: int) -> torch.Tensor:
    """The permutation of a worker's `n` samples for `epoch`; same arguments, same order."""
    generator = torch.Generator().manual_seed(shuffle_seed(seed, epoch, rank))
    return torch.randperm(n, generator=generator)


@dataclass
class TensorShard:
    """x (N, C, ...) and y (N,) of one worker's shard, in this process's (or its GPU's) memory."""

    x: torch.Tensor
    y: torch.Tensor

    @classmethod
    def load(cls, shard, *, prefetch_batches: int = 2, device: torch.device | None = None,
             x_column: str = "x", y_column: str = "y") -> TensorShard:
        """Read a Ray Data shard (DataIterator or Dataset) once, whole blocks at a time.

        batch_size=None yields each block as it is stored: numpy views of the object store's
        Arrow buffers, so the one concatenate below is the only copy.
        """
        xs, ys = [], []
        for block in shard.iter_batches(batch_size=None, batch_format="numpy",
                                        prefetch_batches=prefetch_batches):
            xs.append(block[x_column])
            ys.append(block[y_column])
        if not xs:
            raise ValueError("this worker's dataset shard is empty")
        x = torch.from_numpy(np.concatenate(xs))
        y = torch.from_numpy(np.concatenate(ys))
        device = device or torch.device("cpu")
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            if x.nbytes + y.nbytes <= DEVICE_CACHE_FRACTION * free:
                x, y = x.to(device), y.to(device)
            else:
                # Too big for the device: page-locked host memory makes each batch copy faster.
                x, y = x.pin_memory(), y.pin_memory()
        return cls(x, y)

    def __len__(self) -> int:
        return len(self.y)

    def epoch(self, batch_size: int, *, seed: int, epoch: int, rank: int,
              device: torch.device, drop_last: bool = True) -> Iterator[tuple[torch.Tensor, ...]]:
        """This epoch's batches: every sample once (drop_last drops the tail), seeded order."""
        order = epoch_order(len(self), seed=seed, epoch=epoch, rank=rank).to(self.x.device)
        for i in range(0, len(order) - (batch_size - 1 if drop_last else 0), batch_size):
            index = order[i : i + batch_size]
            yield self._to(self.x[index], device), self._to(self.y[index], device)

    def in_order(self, batch_size: int, *, device: torch.device,
                 drop_last: bool = False) -> Iterator[tuple[torch.Tensor, ...]]:
        """Batches in stored order (validation); slices are views, no copy."""
        for i in range(0, len(self) - (batch_size - 1 if drop_last else 0), batch_size):
            yield (self._to(self.x[i : i + batch_size], device),
                   self._to(self.y[i : i + batch_size], device))

    @staticmethod
    def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
        return t if t.device == device else t.to(device, non_blocking=t.is_pinned())
