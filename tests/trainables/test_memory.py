"""Gradient checkpointing is honoured by the 3D UNet: activations saved for backward shrink, the
gradients do not change."""

from __future__ import annotations

import torch

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.loop.memory import SavedTensorMeter
from trainables.models import build_unet3d

META = DataMeta(1, 2, task="segment", spatial_dims=3)


def _step(checkpointing: bool):
    torch.manual_seed(0)
    model = build_unet3d(TrialConfig(workload="unet3d", patch_size=16, width=0.5,
                                     grad_checkpointing=checkpointing), META)
    x = torch.randn(2, 1, 16, 16, 16, generator=torch.Generator().manual_seed(1))
    y = (x[:, 0] > 0.5).long()
    with SavedTensorMeter() as meter:
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return meter.mb, [p.grad.clone() for p in model.parameters()]


def test_checkpointing_halves_saved_activations_with_the_same_gradients():
    plain_mb, plain_grads = _step(False)
    ckpt_mb, ckpt_grads = _step(True)
    assert plain_mb > 0 and ckpt_mb < 0.6 * plain_mb
    for a, b in zip(plain_grads, ckpt_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_meter_counts_a_shared_storage_once_and_no_parameters():
    w = torch.nn.Parameter(torch.ones(1000))
    x = torch.ones(1000, requires_grad=True) * 2  # not a leaf: an activation
    with SavedTensorMeter() as meter:
        (x * w).sum()
    assert meter.bytes == x.nbytes
