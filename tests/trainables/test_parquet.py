"""Parquet image sets: round trips (also through Ray Data), accepted layouts, clear errors.

Run: PYTHONPATH=. python -m pytest -q tests/trainables/test_parquet.py
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainables.data.arrays import DataError
from trainables.data.load import load_data
from trainables.data.parquet import load_parquet, read_columns, write_parquet


def arrays(n=40, shape=(1, 8, 8), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, *shape)).astype(np.float32), rng.integers(0, 4, n)


def test_round_trip_with_a_validation_file(tmp_path):
    x, y = arrays()
    xv, yv = arrays(12, seed=1)
    train = write_parquet(tmp_path / "train.parquet", x, y, row_group_rows=16)  # 3 row groups
    val = write_parquet(tmp_path / "val.parquet", xv, yv)
    data = load_parquet(train, val_path=val)
    np.testing.assert_array_equal(data.x_train, x)
    np.testing.assert_array_equal(data.y_train, y)
    np.testing.assert_array_equal(data.x_val, xv)
    assert data.y_val.dtype == np.int64 and data.x_train.dtype == np.float32
    assert data.num_classes == int(max(y.max(), yv.max())) + 1


def test_load_data_dispatches_on_the_suffix_and_holds_out_validation(tmp_path):
    x, y = arrays(50, shape=(8, 8))  # (N, H, W): one channel is added
    data = load_data(str(write_parquet(tmp_path / "d.parquet", x, y)))
    assert data.x_train.shape == (40, 1, 8, 8) and data.x_val.shape == (10, 1, 8, 8)
    got = np.concatenate([data.x_train, data.x_val])[:, 0]
    assert sorted(map(bytes, got)) == sorted(map(bytes, x))  # the same samples, split


@pytest.mark.integration
def test_round_trip_through_ray_data(tmp_path, ray_session):
    x, y = arrays()
    path = write_parquet(tmp_path / "d.parquet", x, y)
    batch = ray_session.data.read_parquet(str(path)).take_batch(len(x), batch_format="numpy")
    np.testing.assert_array_equal(batch["x"], x)
    np.testing.assert_array_equal(batch["y"], y)


def test_ray_tensor_columns_and_lists_with_shape_metadata_are_read(tmp_path):
    from ray.data.extensions import ArrowTensorArray

    x, y = arrays(10)
    ray_file = tmp_path / "ray.parquet"
    pq.write_table(pa.table({"img": ArrowTensorArray.from_numpy(x), "label": y}), ray_file)
    got, labels = read_columns(ray_file, "img", "label")
    np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(labels, y)

    flat = pa.array(list(x.reshape(10, -1)), type=pa.list_(pa.float32(), 64))
    field = pa.field("x", flat.type, metadata={"shape": json.dumps([1, 8, 8])})
    list_file = tmp_path / "list.parquet"
    pq.write_table(pa.Table.from_arrays([flat, pa.array(y)], schema=pa.schema(
        [field, pa.field("y", pa.int64())])), list_file)
    np.testing.assert_array_equal(read_columns(list_file, "x", "y")[0], x)


def _write(path, columns: dict, metadata: dict | None = None):
    fields = [pa.field(k, v.type, metadata=(metadata or {}).get(k)) for k, v in columns.items()]
    pq.write_table(pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields)), path)
    return path


def _ragged():
    rows = [[0.0] * 16] * 3 + [[0.0] * 15] + [[0.0] * 16]
    return {"x": pa.array(rows, pa.list_(pa.float32())), "y": pa.array([0, 1, 2, 0, 1])}


@pytest.mark.parametrize(
    ("columns", "metadata", "message"),
    [
        ({"x": pa.array([[0.0] * 4] * 3, pa.list_(pa.float32(), 4)), "label": pa.array([0, 1, 2])},
         None, r"has no column\(s\) \['y'\]"),
        ({"x": pa.array([[0.0] * 4] * 3, pa.list_(pa.float32(), 4)),
          "y": pa.array(["a", "b", "c"])}, {"x": {"shape": "[2, 2]"}},
         "column 'y' must hold integer class ids"),
        ({"x": pa.array(["a", "b"]), "y": pa.array([0, 1])}, None,
         "column 'x' has type string; expected a tensor column"),
        ({"x": pa.array([["a"] * 4] * 2, pa.list_(pa.string(), 4)), "y": pa.array([0, 1])},
         {"x": {"shape": "[2, 2]"}}, "holds string values; images must be numeric"),
        (_ragged(), {"x": {"shape": "[4, 4]"}}, r"row 3 has 15 values .* \(ragged rows\)"),
        ({"x": pa.array([[0.0] * 4] * 3, pa.list_(pa.float32(), 4)), "y": pa.array([0, 1, 2])},
         None, "list column without a sample shape"),
        ({"x": pa.array([[0.0] * 4, None, [0.0] * 4], pa.list_(pa.float32())),
          "y": pa.array([0, 1, 2])}, {"x": {"shape": "[2, 2]"}}, "row 1 is null"),
        ({"x": pa.array([[0.0] * 4] * 3, pa.list_(pa.float32(), 4)),
          "y": pa.array([0, None, 2])}, {"x": {"shape": "[2, 2]"}}, r"row 1 has no label"),
        ({"x": pa.array([[np.nan] * 4] * 3, pa.list_(pa.float32(), 4)),
          "y": pa.array([0, 1, 2])}, {"x": {"shape": "[2, 2]"}}, "NaN or inf"),
    ],
)
def test_malformed_parquet_gives_a_clear_error(tmp_path, columns, metadata, message):
    path = _write(tmp_path / "bad.parquet", columns, metadata)
    with pytest.raises(DataError, match=message) as info:
        load_parquet(path)
    assert str(path) in str(info.value)  # the error says which file


def test_not_a_parquet_file_and_missing_file(tmp_path):
    junk = tmp_path / "junk.parquet"
    junk.write_text("hello")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        load_data(str(junk))
    with pytest.raises(DataError, match="does not exist"):
        load_parquet(tmp_path / "missing.parquet")


def test_validation_file_with_other_sample_shape_is_refused(tmp_path):
    train = write_parquet(tmp_path / "t.parquet", *arrays(shape=(1, 8, 8)))
    val = write_parquet(tmp_path / "v.parquet", *arrays(shape=(1, 6, 6)))
    with pytest.raises(DataError, match="samples have shape"):
        load_parquet(train, val_path=val)
