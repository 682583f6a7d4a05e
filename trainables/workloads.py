"""Built-in workloads: ONE registry of what a workload name trains and on which data by default.

    classifier  a small 2D CNN on the synthetic part-combination images (1x32x32, 10 classes)
    unet3d      3D UNet segmentation on synthetic organelle volumes, 32^3 chunks
    resnet18    a ResNet-18-shaped classifier on CIFAR-shaped synthetic images (3x32x32, 10
                classes, 20,000 + 2,000): sized so that a GPU's arithmetic, not its kernel
                launches, sets the pace
    unet3d-64   the 3D UNet at 64^3 crops of 128^3 volumes: the same, for segmentation

A user's own model plugs in as a builder (cfg, meta) -> nn.Module, given as an object through the
Python API or as 'module:function' (imported where the workers run), with the user's own data.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import ArrayData, DataMeta
from trainables.data.load import load_data
from trainables.data.synthetic import cached_synthetic_images
from trainables.data.volumes import cached_synthetic_volumes
from trainables.models import ModelBuilder, build_classifier, build_unet3d
from trainables.models.resnet import build_resnet18


@dataclass(frozen=True)
class Workload:
    data: Callable[[], ArrayData]
    """The built-in data set (generated on first use, then cached)."""
    model: ModelBuilder
    family: str = "classifier"
    """'classifier' (images, class labels) or 'unet3d' (volumes, voxel labels): what its
    spaces, checks and baseline habits are."""
    reference_batch: int = 128
    """The global batch its default lr (3e-3) is known to train well at (trainables/loop/lr.py)."""


WORKLOADS: dict[str, Workload] = {
    "classifier": Workload(data=cached_synthetic_images, model=build_classifier),
    "unet3d": Workload(data=cached_synthetic_volumes, model=build_unet3d, family="unet3d",
                       reference_batch=2),
    "resnet18": Workload(data=partial(cached_synthetic_images, channels=3, n_train=20000),
                         model=build_resnet18),
    "unet3d-64": Workload(data=partial(cached_synthetic_volumes, size=128, chunk=64),
                          model=build_unet3d, family="unet3d", reference_batch=2),
}


def family(workload: str | None) -> str | None:
    """The built-in family of a workload name ('classifier', 'unet3d'); the name itself where
    it is none of WORKLOADS (a model of your own)."""
    return WORKLOADS[workload].family if workload in WORKLOADS else workload


def workload_data(workload: str, path: str | None) -> ArrayData:
    """The user's data when a path is given (an .npz, a Parquet file, or a folder of .npy
    volumes), else the workload's built-in synthetic set."""
    if path is not None:
        return load_data(path)
    if workload not in WORKLOADS:
        raise ValueError(f"workload {workload!r} has no built-in data; pass --data "
                         f"(built-in: {sorted(WORKLOADS)})")
    return WORKLOADS[workload].data()


def load_builder(path: str) -> ModelBuilder:
    """A user's own builder by 'module:function', imported where the worker runs (the module
    must be importable there, e.g. shipped with `--working-dir`)."""
    if ":" not in path:
        raise ValueError(f"unknown workload {path!r}; known: {sorted(WORKLOADS)}, or a builder "
                         "of your own as 'module:function'")
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def build_model(cfg: TrialConfig, meta: DataMeta, builder: ModelBuilder | None = None) -> nn.Module:
    """The model for `cfg.workload`, or `builder` (a user's own) when one is given."""
    if builder is None and cfg.workload not in WORKLOADS and ":" in cfg.workload:
        builder = load_builder(cfg.workload)
    if builder is not None:
        model = builder(cfg, meta)
        if not isinstance(model, nn.Module):
            raise TypeError(f"model builder {builder!r} returned {type(model).__name__}, "
                            "not a torch.nn.Module")
        return model
    if cfg.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {cfg.workload!r}; known: {sorted(WORKLOADS)}")
    return WORKLOADS[cfg.workload].model(cfg, meta)
