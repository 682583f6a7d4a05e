"""Built-in workloads: which model a workload name builds and which data it trains on by default.

    classifier  2D CNN image classifier on the synthetic part-combination images
    unet3d      3D UNet segmentation on synthetic organelle volumes (seed 003)

A user's own model plugs in as a builder (cfg, meta) -> nn.Module with their own data.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trainables.datasets import ArrayData, cached_synthetic_images, load_data
from trainables.models import DataMeta
from trainables.volumes import cached_synthetic_volumes, load_volume_folder

DEFAULT_DATA: dict[str, Callable[[], ArrayData]] = {
    "classifier": cached_synthetic_images,
    "unet3d": cached_synthetic_volumes,
}


def workload_data(workload: str, path: str | None) -> ArrayData:
    """The user's data when a path is given (an .npz, a Parquet file, or a folder of .npy
    volumes), else the workload's built-in synthetic set."""
    if path is None:
        if workload not in DEFAULT_DATA:
            raise ValueError(f"workload {workload!r} has no built-in data; pass --data "
                             f"(built-in: {sorted(DEFAULT_DATA)})")
        return DEFAULT_DATA[workload]()
    if Path(path).is_dir():
        return load_volume_folder(path)
    return load_data(path)


def data_meta(data: ArrayData) -> DataMeta:
    spatial = data.x_train.ndim - 2
    task = "segment" if data.y_train.ndim > 1 else "classify"
    return DataMeta(data.in_channels, data.num_classes, task=task, spatial_dims=spatial)
