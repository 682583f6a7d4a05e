"""The gradient noise scale of a trained model: how much a bigger batch is worth in steps.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training") show that training to a
given loss takes S steps and E examples with

    S = S_min (1 + B_noise / B)        E = E_min (1 + B / B_noise)

so, against a run at batch b0, a run at batch b needs (1 + b / B_noise) / (1 + b0 / B_noise)
times the epochs. B_noise = tr(Sigma) / |G|^2 (gradient variance over squared gradient norm) is
measured here the way their Appendix A does: per-micro-batch gradients g_i at B_small and their
mean G at B_big = k * B_small give two unbiased estimates,

    |G|^2  ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(S)  ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

averaged over a few big batches before their ratio is taken (the ratio of means is far less
noisy than the mean of ratios). B_noise grows as the loss falls, so it is measured on the
baseline's trained model, at the accuracy the search must reach, not at initialization.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import nn


# Where along a run B_noise is measured (fractions of its epochs): it grows as the loss falls, so
# one value at the end understates what a bigger batch costs early on.
NOISE_POINTS = (0.1, 0.25, 0.5, 0.75, 1.0)
# Where the gradient is all noise at the measured batch (|G|^2 estimated at or below zero: a
# trained model near its minimum), B_noise is past any batch. Tracking stores finite numbers, so
# it is held here; shown as "inf" (orchestrator/screen/predict.py).
ALL_NOISE = 1e9


def noise_epochs(epochs: int) -> set[int]:
    """The epochs of a run of `epochs` after which its noise scale is measured."""
    return {min(epochs, max(1, round(epochs * q))) for q in NOISE_POINTS}


def _flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.detach().reshape(-1).float() for p in model.parameters()
                      if p.grad is not None])


def gradient_noise_scale(model: nn.Module, loss_fn: Callable[[torch.Tensor, tuple],
                                                             torch.Tensor],
                         batches: Iterable[tuple[torch.Tensor, torch.Tensor]], *,
                         small: int, parts: int = 4, big_batches: int = 4) -> float:
    """B_noise of `model` at its current weights, from `big_batches` batches of
    `small * parts` samples each (fewer if `batches` runs out; a batch is cut to a multiple of
    `small`). `loss_fn(model(x), (x, y))` is the mean training loss of a batch (a task's
    `loss`). The model's weights
    and gradients are left as they were found; returns inf when the gradient is all noise at
    this size (any batch is then as good per sample), nan when nothing could be measured."""
    was_training = model.training
    model.train()
    saved = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    g_small, g_big, n = 0.0, 0.0, 0
    try:
        for x, y in batches:
            k = min(parts, len(y) // small)
            if k < 2:
                continue
            grads = []
            for i in range(k):
                model.zero_grad(set_to_none=True)
                sl = slice(i * small, (i + 1) * small)
                loss_fn(model(x[sl]), (x[sl], y[sl])).backward()
                grads.append(_flat_grad(model))
            stacked = torch.stack(grads)
            g_small += float((stacked.pow(2).sum(dim=1)).mean())
            g_big += float(stacked.mean(dim=0).pow(2).sum())
            n += 1
            if n >= big_batches:
                break
    finally:
        for p, g in zip(model.parameters(), saved):
            p.grad = g
        model.train(was_training)
    if n == 0:
        return math.nan
    g_small, g_big = g_small / n, g_big / n
    b_small, b_big = small, small * parts
    true_sq = (b_big * g_big - b_small * g_small) / (b_big - b_small)
    trace = (g_small - g_big) / (1 / b_small - 1 / b_big)
    if true_sq <= 0:
        return math.inf
    return max(trace / true_sq, 0.0)


def noise_at(series: Sequence[Sequence[float]], epoch: float) -> float:
    """B_noise at `epoch` from measured [epoch, B_noise] points: log-linear between them, held
    flat before the first and after the last; nan without any finite point."""
    points = sorted((float(e), float(b)) for e, b in series if b == b and b > 0)
    if not points:
        return math.nan
    if epoch <= points[0][0]:
        return points[0][1]
    for (e0, b0), (e1, b1) in zip(points, points[1:]):
        if epoch <= e1:
            w = (epoch - e0) / (e1 - e0) if e1 > e0 else 1.0
            return math.exp(math.log(b0) + w * (math.log(b1) - math.log(b0)))
    return points[-1][1]


def run_epochs_ratio(batch: int, reference_batch: int, series: Sequence[Sequence[float]],
                     epochs: int) -> float:
    """How many times the epochs of a whole run at `reference_batch` (`epochs` long, its noise
    scale measured along it: `series`) a run at `batch` needs: each of the reference run's
    epochs is worth `epochs_ratio` of the candidate's at the noise scale of that epoch."""
    ratios = [epochs_ratio(batch, reference_batch, noise_at(series, e))
              for e in range(1, epochs + 1)]
    return math.nan if any(math.isnan(r) for r in ratios) else sum(ratios) / len(ratios)


def epochs_ratio(batch: int, reference_batch: int, noise_scale: float) -> float:
    """How many times the epochs of a run at `reference_batch` a run at `batch` needs to reach
    the same loss: (1 + batch / B_noise) / (1 + reference_batch / B_noise)."""
    if math.isnan(noise_scale):
        return math.nan
    if math.isinf(noise_scale):
        return 1.0  # all noise: a bigger batch loses nothing per sample
    if noise_scale <= 0:
        return batch / reference_batch  # no noise: only steps count
    return (1 + batch / noise_scale) / (1 + reference_batch / noise_scale)
