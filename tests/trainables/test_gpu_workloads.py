"""The workloads sized for a GPU (issue 41): a ResNet-18-shaped classifier for CIFAR-shaped
images, and the 3D UNet at 64^3 crops; their registry entries (no Ray, no data generated)."""

from __future__ import annotations

import torch

from search_spaces.default import _cube_sides
from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.loop.lr import lr_factor
from trainables.workloads import WORKLOADS, family


def test_resnet18_is_resnet18_shaped_and_width_scales_it():
    meta = DataMeta(3, 10, spatial_dims=2)
    full = WORKLOADS["resnet18"].model(TrialConfig(workload="resnet18"), meta)
    count = sum(p.numel() for p in full.parameters())
    assert 11.1e6 < count < 11.3e6  # CIFAR ResNet-18: 11.17M parameters
    assert full(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    half = WORKLOADS["resnet18"].model(TrialConfig(workload="resnet18", width=0.5), meta)
    assert sum(p.numel() for p in half.parameters()) < count / 3


def test_the_64_cube_unet_is_of_the_unet3d_family_with_patches_of_its_chunks():
    assert family("unet3d-64") == family("unet3d") == "unet3d" and family("resnet18") == \
        "classifier" and family("my.module:build") == "my.module:build"
    assert lr_factor(TrialConfig(workload="unet3d-64", batch_size=8)) == 2.0  # sqrt(8 / 2)

    class Chunks:
        image_size = 64

    assert _cube_sides(Chunks, (0.5, 0.75)) == [32, 48]
