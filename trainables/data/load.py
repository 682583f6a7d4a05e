"""One entry point for a data path: a folder of .npy volumes, a Parquet file or an .npz."""

from __future__ import annotations

import os
from pathlib import Path

from trainables.data.arrays import ArrayData
from trainables.data.npz import load_npz
from trainables.data.parquet import SUFFIXES as PARQUET_SUFFIXES
from trainables.data.parquet import load_parquet
from trainables.data.volumes import load_volume_folder


def load_data(path: str | os.PathLike) -> ArrayData:
    """A user's data by its kind: a folder (images/ and labels/ of .npy volumes), a .parquet
    (by suffix), else an .npz. Validated here, before Ray starts."""
    if Path(path).is_dir():
        return load_volume_folder(path)
    if Path(path).suffix.lower() in PARQUET_SUFFIXES:
        return load_parquet(path)
    return load_npz(path)
