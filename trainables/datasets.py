"""In-memory datasets: the built-in synthetic image set and a user's `.npz` file.

Everything here is plain numpy and runs before Ray starts, so a bad file is reported before any
trial is launched.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class DataError(ValueError):
    """A data file or array that cannot be trained on; the message says what and where."""


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
    def image_size(self) -> int:
        """The largest patch that fits: the smallest spatial side of the images."""
        return int(min(self.x_train.shape[2:]))

    @property
    def in_channels(self) -> int:
        return int(self.x_train.shape[1])

    def describe(self) -> str:
        return (
            f"{self.source}: train {tuple(self.x_train.shape)}, val {tuple(self.x_val.shape)}, "
            f"{self.num_classes} classes"
        )


# ------------------------------------------------------------------------------------------------
# Built-in synthetic classifier data
# ------------------------------------------------------------------------------------------------

SYNTHETIC_DEFAULTS = dict(n_train=8000, n_val=2000, size=32, num_classes=10, seed=1234)


def synthetic_images(
    n_train: int = 8000,
    n_val: int = 2000,
    size: int = 32,
    num_classes: int = 10,
    seed: int = 1234,
    noise: float = 0.3,
) -> ArrayData:
    """Deterministic images whose class is a *combination* of parts spread over the whole image.

    A bank of 16 small textured parts sits on a 4x4 grid of anchors. Each class owns 5 of them;
    an image shows its class's parts (jittered, random strength) plus 2 distractor parts of other
    classes, under Gaussian noise. So a crop that sees fewer anchors sees less evidence (patch
    size changes accuracy) and telling 10 overlapping part-sets apart takes enough filters
    (width changes accuracy).
    """
    rng = np.random.default_rng(seed)
    n_parts, part, per_class, distractors = 16, 5, 5, 2
    bank = rng.standard_normal((n_parts, part, part)).astype(np.float32)
    bank /= np.abs(bank).max(axis=(1, 2), keepdims=True)
    step = size // 4
    anchors = [(step // 2 + step * i, step // 2 + step * j) for i in range(4) for j in range(4)]
    owners = np.stack([rng.choice(n_parts, per_class, replace=False) for _ in range(num_classes)])

    def render(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, num_classes, n)
        x = rng.normal(0.0, noise, (n, 1, size, size)).astype(np.float32)
        jitter = rng.integers(-2, 3, (n, per_class + distractors, 2))
        gain = rng.uniform(0.6, 1.4, (n, per_class + distractors)).astype(np.float32)
        for i in range(n):
            others = np.setdiff1d(np.arange(n_parts), owners[y[i]])
            parts = np.concatenate([owners[y[i]], rng.choice(others, distractors, replace=False)])
            for k, p in enumerate(parts):
                r = int(np.clip(anchors[p][0] - part // 2 + jitter[i, k, 0], 0, size - part))
                c = int(np.clip(anchors[p][1] - part // 2 + jitter[i, k, 1], 0, size - part))
                x[i, 0, r : r + part, c : c + part] += gain[i, k] * bank[p]
        return x, y.astype(np.int64)

    x_train, y_train = render(n_train)
    x_val, y_val = render(n_val)
    return ArrayData(x_train, y_train, x_val, y_val, num_classes, source="synthetic")


def cache_dir() -> Path:
    return Path(os.environ.get("ORCHESTRATOR_CACHE", Path.home() / ".cache" / "orchestrator"))


def cached_synthetic_images(**overrides: int) -> ArrayData:
    """The synthetic set, generated once per parameter set and then read from an .npz cache."""
    params = {**SYNTHETIC_DEFAULTS, **overrides}
    key = hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:12]
    path = cache_dir() / f"synthetic-{key}.npz"
    if path.exists():
        try:
            return load_npz(path, source="synthetic")
        except DataError:
            path.unlink()  # a torn write from an interrupted run: regenerate it
    data = synthetic_images(**params)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(tmp, x=data.x_train, y=data.y_train, x_val=data.x_val, y_val=data.y_val)
    os.replace(tmp, path)  # atomic: concurrent first runs never see half a file
    return data


# ------------------------------------------------------------------------------------------------
# A user's .npz
# ------------------------------------------------------------------------------------------------


def load_npz(path: str | os.PathLike, *, val_fraction: float = 0.2, source: str | None = None):
    """Load `x`, `y` and optional `x_val`, `y_val` from an .npz, validating shapes and dtypes.

    `x` is (N, H, W) or (N, C, H, W); `y` is (N,) integer class ids. Without `x_val`, the last
    `val_fraction` of the samples (after a seeded shuffle) is held out. The file is read with
    `allow_pickle=False`: an .npz holding Python objects is refused, never unpickled.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise DataError(f"{path} is not a readable .npz file ({err})") from None

    return from_arrays(arrays, where=str(path), val_fraction=val_fraction,
                       source=source or str(path))


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

    x, y = _check_pair(arrays["x"], arrays["y"], path, "x", "y")
    if "x_val" in arrays:
        x_val, y_val = _check_pair(arrays["x_val"], arrays["y_val"], path, "x_val", "y_val")
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


def _check_pair(x: np.ndarray, y: np.ndarray, path, xname: str, yname: str):
    if x.ndim == 3:
        x = x[:, None]  # (N, H, W) -> one channel
    if x.ndim != 4:
        raise DataError(f"{path}: '{xname}' must be (N, H, W) or (N, C, H, W), got shape {x.shape}")
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


def load_data(path: str | None) -> ArrayData:
    """The search's data: a user's .npz or .parquet (by suffix), or the cached synthetic set when
    no path is given."""
    if path is None:
        return cached_synthetic_images()
    if Path(path).suffix.lower() in (".parquet", ".pq"):
        from trainables.parquet import load_parquet  # imports this module: import it late

        return load_parquet(path)
    return load_npz(path)
