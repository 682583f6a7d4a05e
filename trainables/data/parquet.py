"""Parquet image sets: a fixed-shape tensor column of images plus an integer label column.

Accepted image columns, in the order they are recognised:
- pyarrow's canonical `fixed_shape_tensor` extension (what `write_parquet` writes; readable by
  any Arrow reader and by `ray.data.read_parquet`);
- Ray Data's `ArrowTensorArray` extension (what `Dataset.write_parquet` writes for tensors);
- a fixed-size list (or list) column whose field metadata holds the sample shape as JSON, e.g.
  `{"shape": "[1, 32, 32]"}`.
Everything is validated up front, before Ray starts; errors name the file, the column and, where
one row is at fault, the row. Values are read as numbers only: no column is ever unpickled.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trainables.data.arrays import ArrayData, DataError, check_pair, hold_out

SUFFIXES = (".parquet", ".pq")
SHAPE_KEY = b"shape"
"""Field-metadata key holding a list column's per-sample shape (JSON list of ints)."""


def write_parquet(path: str | os.PathLike, x: np.ndarray, y: np.ndarray, *, x_column: str = "x",
                  y_column: str = "y", row_group_rows: int = 4096) -> Path:
    """Write images `x` (N, ...) and labels `y` (N,) as a `fixed_shape_tensor` and an int64 column.

    The round trip `load_parquet(write_parquet(p, x, y))` gives back the same arrays.
    """
    x, y = np.ascontiguousarray(x), np.asarray(y)
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} samples but y has {len(y)}")
    images = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    table = pa.table({x_column: images, y_column: pa.array(y.astype(np.int64, copy=False))})
    path = Path(path)
    pq.write_table(table, path, row_group_size=row_group_rows)
    return path


def load_parquet(path: str | os.PathLike, *, x_column: str = "x", y_column: str = "y",
                 val_path: str | os.PathLike | None = None, val_fraction: float = 0.2,
                 source: str | None = None) -> ArrayData:
    """Load images and labels from a Parquet file (and optionally a validation file).

    Without `val_path`, the last `val_fraction` of the samples (after a seeded shuffle, the same
    rule as `load_npz`) is held out for validation.
    """
    path = Path(path)
    x, y = read_columns(path, x_column, y_column)
    if val_path is not None:
        val_path = Path(val_path)
        x_val, y_val = read_columns(val_path, x_column, y_column)
        if x_val.shape[1:] != x.shape[1:]:
            raise DataError(f"{val_path}: column '{x_column}' samples have shape "
                            f"{x_val.shape[1:]} but {path} has {x.shape[1:]}")
    else:
        x, y, x_val, y_val = hold_out(x, y, val_fraction, str(path))
    num_classes = int(max(y.max(), y_val.max())) + 1
    return ArrayData(x, y, x_val, y_val, num_classes, source=source or str(path))


def read_columns(path: Path, x_column: str, y_column: str) -> tuple[np.ndarray, np.ndarray]:
    """(x float32 (N, C, H, W), y int64 (N,)) from one file, validated."""
    if not path.is_file():
        raise DataError(f"data file {path} does not exist")
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"{path} is not a readable Parquet file ({err})") from None
    missing = [c for c in (x_column, y_column) if c not in schema.names]
    if missing:
        raise DataError(f"{path} has no column(s) {missing} (found {schema.names}); name the "
                        "image and label columns with x_column= / y_column=")
    try:
        table = pq.read_table(path, columns=[x_column, y_column])
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"{path}: cannot read columns {[x_column, y_column]} ({err})") from None
    x = _tensor_column(table.column(x_column), schema.field(x_column), path)
    y = _label_column(table.column(y_column), path, y_column)
    return check_pair(x, y, path, x_column, y_column)


def _first_null(col: pa.ChunkedArray) -> int:
    return int(pc.index(pc.is_null(col), True).as_py())


def _tensor_column(col: pa.ChunkedArray, field: pa.Field, path: Path) -> np.ndarray:
    name, typ = field.name, col.type
    where = f"{path}: column '{name}'"
    if col.null_count:
        raise DataError(f"{where}: row {_first_null(col)} is null; every row needs an image")
    chunks = col.chunks
    if isinstance(typ, pa.BaseExtensionType):
        shape = getattr(typ, "shape", None)
        if shape is None or not _is_list(typ.storage_type):
            raise DataError(f"{where} has type {typ}, which is not a fixed-shape tensor "
                            "(ragged or object columns are not supported)")
        permutation = getattr(typ, "permutation", None)
        if permutation is not None and list(permutation) != sorted(permutation):
            raise DataError(f"{where}: tensors with a dimension permutation {permutation} are "
                            "not supported; write them in row-major order")
        shape = tuple(int(s) for s in shape)
        chunks = [chunk.storage for chunk in chunks]
    elif _is_list(typ):
        raw = (field.metadata or {}).get(SHAPE_KEY)
        if raw is None:
            raise DataError(f"{where} is a list column without a sample shape: add field "
                            "metadata {'shape': '[C, H, W]'}, or write it with "
                            "trainables.data.parquet.write_parquet (a fixed_shape_tensor column)")
        try:
            shape = tuple(int(s) for s in json.loads(raw))
        except (ValueError, TypeError):
            raise DataError(f"{where}: shape metadata {raw!r} is not a JSON list of ints"
                            ) from None
    else:
        raise DataError(f"{where} has type {typ}; expected a tensor column (pyarrow "
                        "fixed_shape_tensor, Ray ArrowTensorArray, or a fixed-size list with "
                        "'shape' metadata)")
    size = math.prod(shape)
    value_type = chunks[0].type.value_type if chunks else pa.float32()
    if not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise DataError(f"{where} holds {value_type} values; images must be numeric")
    parts, row = [], 0
    for chunk in chunks:
        lengths = pc.list_value_length(chunk).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(lengths != size)
        if len(bad):
            raise DataError(f"{where}: row {row + int(bad[0])} has {int(lengths[bad[0]])} values "
                            f"but the sample shape {list(shape)} needs {size} (ragged rows)")
        if chunk.values.null_count:
            raise DataError(f"{where}: rows {row}..{row + len(chunk) - 1} contain null values")
        # flatten() honours the chunk's offset, so sliced chunks give exactly their own values.
        values = chunk.flatten().to_numpy(zero_copy_only=False)
        parts.append(values.reshape(len(chunk), *shape))
        row += len(chunk)
    if not parts:
        raise DataError(f"{where} is empty")
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _label_column(col: pa.ChunkedArray, path: Path, name: str) -> np.ndarray:
    where = f"{path}: column '{name}'"
    if not pa.types.is_integer(col.type):
        raise DataError(f"{where} must hold integer class ids, got type {col.type}")
    if col.null_count:
        raise DataError(f"{where}: row {_first_null(col)} has no label (null)")
    return col.to_numpy()


def _is_list(typ: pa.DataType) -> bool:
    return (pa.types.is_fixed_size_list(typ) or pa.types.is_list(typ)
            or pa.types.is_large_list(typ))
