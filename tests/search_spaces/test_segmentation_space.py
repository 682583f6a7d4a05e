"""The unet3d space: seed 003's knobs, gradient checkpointing included, checked without Ray."""

from __future__ import annotations

import pytest
from ray import tune

from search_spaces import SpaceContext, check_space, resolve_space

CPU3D = SpaceContext(use_gpu=False, cpus_per_trial=2, image_size=32, workload="unet3d")
GPU3D = SpaceContext(use_gpu=True, gpus_per_trial=4, cpus_per_trial=16, image_size=32,
                     workload="unet3d")


def test_segmentation_space_searches_seed_003s_knobs_and_checkpointing():
    searched, fixed = resolve_space("default", CPU3D)
    assert set(searched) == {"precision", "batch_size", "workers", "patch_size", "width",
                             "grad_checkpointing"}
    assert fixed == {}
    assert searched["grad_checkpointing"].categories == [False, True]
    assert all(p % 4 == 0 for p in searched["patch_size"].categories)
    assert searched["width"].categories == [0.5, 1.0]  # 2x filters only where a GPU pays
    check_space(searched, {"workload": "unet3d"}, CPU3D)
    gpu, _ = resolve_space("default", GPU3D)
    assert 2.0 in gpu["width"].categories and "fp16-mixed" in gpu["precision"].categories


def test_unet3d_patches_must_be_multiples_of_4():
    with pytest.raises(ValueError, match="patch_size.*multiples of 4"):
        check_space({"patch_size": tune.choice([16, 18])}, {"workload": "unet3d"}, CPU3D)
