"""Run `loop.fit` without Ray on in-memory tensors (what unit tests of the loop need)."""

from __future__ import annotations

import torch

from trainables.config import TrialConfig
from trainables.data.npz import load_npz
from trainables.loop import LoopIO, fit
from trainables.data.arrays import DataMeta, with_spatial_dims


def fit_local(npz_path: str, reports: list | None = None, io_overrides: dict | None = None,
              spatial_dims: int | None = None, profile: tuple[str, ...] = (), measure=None,
              **settings) -> dict:
    """profile: switches the speed profile picks before `fit` (`measure` injects its timing);
    the result then holds its metrics (profile_s, pick.*) too."""
    data = with_spatial_dims(load_npz(npz_path), spatial_dims)
    cfg = TrialConfig(**settings)
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    bs = cfg.batch_size

    def train_batches(epoch):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(x) - bs + 1, bs):
            yield x[order[i : i + bs]], y[order[i : i + bs]]

    def val_batches():
        for i in range(0, len(xv), 64):
            yield xv[i : i + 64], yv[i : i + 64]

    io = LoopIO(train_batches=train_batches, val_batches=val_batches,
                steps_per_epoch=len(x) // bs,
                report=(reports.append if reports is not None else lambda m: None),
                **(io_overrides or {}))
    found = {}
    if profile:
        from trainables.loop.profile import profile as run_profile

        picked = run_profile(cfg, data.meta(), io, profile, measure)
        cfg, found = picked.apply(cfg), picked.metrics()
    return {**fit(cfg, data.meta(), io), **found}


def fit_legacy_local(npz_path: str, reports: list | None = None, **settings) -> dict:
    from trainables.loop.legacy import fit_legacy

    data = load_npz(npz_path)
    cfg = TrialConfig(loop="legacy", **settings)
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    io = LoopIO(train_batches=lambda epoch: iter(()), val_batches=lambda: [(xv, yv)],
                steps_per_epoch=0,
                report=(reports.append if reports is not None else lambda m: None))
    return fit_legacy(cfg, DataMeta(data.in_channels, data.num_classes), io,
                      torch.from_numpy(data.x_train), torch.from_numpy(data.y_train))
