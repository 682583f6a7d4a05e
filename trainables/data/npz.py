"""A user's `.npz` file of arrays, and the one entry point that reads any data path."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from trainables.data.arrays import DataError, from_arrays

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
