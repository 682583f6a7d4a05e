"""In-memory arrays a search trains on, and what the models and the loop need to know of them.

Everything here is plain numpy and runs before Ray starts, so bad data is reported before any
trial is launched. The loaders (`synthetic`, `npz`, `parquet`, `volumes`) all return `ArrayData`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class DataError(ValueError):
    """A data file or array that cannot be trained on; the message says what and where."""


@dataclass(frozen=True)
class DataMeta:
    """What a model builder and the loop need to know about the data."""

    in_channels: int
    num_classes: int
    task: str = "classify"
    """'classify' (y is one class id per sample) or 'segment' (y is a label volume)."""
    spatial_dims: int = 2


@dataclass(frozen=True)
class ArrayData:
    """Train and validation arrays: x is (N, C, H, W) float32, y is (N,) int64 class ids."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int
    source: str

    @property
    def spatial_dims(self) -> int:
        """0 feature vectors (N, F), 1 signals (N, C, L), 2 images, 3 volumes."""
        return self.x_train.ndim - 2 if self.x_train.ndim > 2 else 0

    @property
    def image_size(self) -> int:
        """The largest patch that fits: the smallest spatial side (0 without spatial axes)."""
        return int(min(self.x_train.shape[2:], default=0))

    @property
    def in_channels(self) -> int:
        return int(self.x_train.shape[1])

    def describe(self) -> str:
        return (
            f"{self.source}: train {tuple(self.x_train.shape)}, val {tuple(self.x_val.shape)}, "
            f"{self.num_classes} classes"
        )

    def meta(self) -> DataMeta:
        """The model's view of this data: channels, classes, task and spatial dimensions."""
        task = "segment" if self.y_train.ndim > 1 else "classify"
        return DataMeta(self.in_channels, self.num_classes, task=task,
                        spatial_dims=self.spatial_dims)


def from_arrays(arrays: dict[str, np.ndarray], *, where: str = "arrays",
                val_fraction: float = 0.2, source: str | None = None) -> ArrayData:
    """ArrayData from `x`, `y` and optional `x_val`, `y_val` arrays, validated like a file.

    `x` is (N, H, W) or (N, C, H, W); `y` is (N,) integer class ids. Without `x_val`, the last
    `val_fraction` of the samples (after a seeded shuffle) is held out.
    """
    path = where
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(f"{path} has no array '{key}' (found {sorted(arrays)}); "
                            "save it with np.savez(path, x=images, y=labels)")
    if ("x_val" in arrays) != ("y_val" in arrays):
        raise DataError(f"{path}: 'x_val' and 'y_val' must be given together")

    x, y = check_pair(arrays["x"], arrays["y"], path, "x", "y")
    if "x_val" in arrays:
        x_val, y_val = check_pair(arrays["x_val"], arrays["y_val"], path, "x_val", "y_val")
        if x_val.shape[1:] != x.shape[1:]:
            raise DataError(f"{path}: x_val samples have shape {x_val.shape[1:]} "
                            f"but x samples have {x.shape[1:]}")
    else:
        x, y, x_val, y_val = hold_out(x, y, val_fraction, where)

    num_classes = int(max(y.max(), y_val.max())) + 1
    return ArrayData(x, y, x_val, y_val, num_classes, source=source or where)


def hold_out(x: np.ndarray, y: np.ndarray, val_fraction: float, where: str):
    """(x, y, x_val, y_val): the last `val_fraction` of a seeded shuffle is held out."""
    if not 0 < val_fraction < 1:
        raise DataError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_val = max(1, int(len(x) * val_fraction))
    if n_val >= len(x):
        raise DataError(f"{where}: {len(x)} samples are too few to hold out a validation set")
    order = np.random.default_rng(0).permutation(len(x))
    return x[order[:-n_val]], y[order[:-n_val]], x[order[-n_val:]], y[order[-n_val:]]


def check_pair(x: np.ndarray, y: np.ndarray, path, xname: str, yname: str):
    if x.ndim == 3:
        x = x[:, None]  # (N, H, W) -> one channel; signals (N, C, L) need spatial_dims=1
    if x.ndim not in (2, 4, 5):
        raise DataError(f"{path}: '{xname}' must be (N, F) features, (N, H, W) or (N, C, H, W) "
                        f"images, or (N, C, D, H, W) volumes; got shape {x.shape}")
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise DataError(f"{path}: '{xname}' must be numeric, got dtype {x.dtype}")
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{path}: '{yname}' must be a 1-D integer array of class ids, "
                        f"got shape {y.shape} dtype {y.dtype}")
    if len(x) != len(y):
        raise DataError(f"{path}: '{xname}' has {len(x)} samples but '{yname}' has {len(y)}")
    if len(y) == 0:
        raise DataError(f"{path}: '{xname}' is empty")
    if y.min() < 0:
        raise DataError(f"{path}: '{yname}' has negative class ids (min {y.min()})")
    x = x.astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise DataError(f"{path}: '{xname}' contains NaN or inf values")
    return np.ascontiguousarray(x), y.astype(np.int64, copy=False)



def with_spatial_dims(data: ArrayData, dims: int | None) -> ArrayData:
    """`data` read with `dims` spatial axes: the loaders add a channel axis to every 3-D array
    (N, H, W); signals (N, C, L) drop it again, and a missing channel axis is added."""
    if dims is None or data.spatial_dims == dims:
        return data
    arrays = [data.x_train, data.x_val]
    have = data.spatial_dims
    if have == dims + 1 and data.x_train.shape[1] == 1:
        arrays = [a[:, 0] for a in arrays]  # the channel axis a loader added
    elif have + 1 == dims:
        arrays = [a[:, None] for a in arrays]
    else:
        raise DataError(f"{data.source}: samples of shape {data.x_train.shape[1:]} cannot be "
                        f"read with spatial_dims={dims} (0 (F), 1 (C, L), 2 (C, H, W), "
                        "3 (C, D, H, W))")
    if data.y_train.ndim > 1:
        raise DataError(f"{data.source}: spatial_dims applies to classification data only")
    x_train, x_val = (np.ascontiguousarray(a) for a in arrays)
    return ArrayData(x_train, data.y_train, x_val, data.y_val, data.num_classes, data.source)
