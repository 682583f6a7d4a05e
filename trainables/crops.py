"""Random and center crops on batched torch tensors, for 2D (N,C,H,W) and 3D (N,C,D,H,W).

Crops run after batching, on whole tensors: one gather per batch costs far less than cropping
sample by sample inside the data pipeline (measured in benchmarks/data_pipeline.py).
"""

from __future__ import annotations

import torch


def random_crop(x: torch.Tensor, size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """An independent random `size`-sided crop of every sample, in bounds, as one gather."""
    spatial = x.shape[2:]
    if any(size > s for s in spatial):
        raise ValueError(f"patch_size {size} is larger than the samples' spatial shape {tuple(spatial)}")
    if all(size == s for s in spatial):
        return x
    n, dims = x.shape[0], len(spatial)
    ar = torch.arange(size, device=x.device)
    index: list[torch.Tensor] = [
        torch.arange(n, device=x.device).view(n, *([1] * (dims + 1))),
        torch.arange(x.shape[1], device=x.device).view(1, -1, *([1] * dims)),
    ]
    for d, extent in enumerate(spatial):
        start = torch.randint(0, extent - size + 1, (n,), generator=generator).to(x.device)
        shape = [n, 1] + [1] * dims
        shape[2 + d] = size
        index.append((start.view(n, 1) + ar).view(shape))
    return x[tuple(index)]


def center_crop(x: torch.Tensor, size: int) -> torch.Tensor:
    """The central `size`-sided crop (validation sees what training saw: patches of one size)."""
    slices = [slice(None), slice(None)]
    for extent in x.shape[2:]:
        if size > extent:
            raise ValueError(f"patch_size {size} is larger than the samples' side {extent}")
        start = (extent - size) // 2
        slices.append(slice(start, start + size))
    return x[tuple(slices)]
