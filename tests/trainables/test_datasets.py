"""The .npz loader and the synthetic set: shapes, dtypes and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import make_npz
from trainables.data.arrays import DataError
from trainables.data.npz import load_npz
from trainables.data.synthetic import cached_synthetic_images, synthetic_images


def test_npz_with_validation_arrays(tmp_path):
    data = load_npz(make_npz(tmp_path / "d.npz", n=50, n_val=20, classes=3))
    assert data.x_train.shape == (50, 1, 16, 16) and data.x_train.dtype == np.float32
    assert data.x_val.shape == (20, 1, 16, 16) and data.y_val.dtype == np.int64
    assert data.num_classes == 3 and data.image_size == 16 and data.in_channels == 1


def test_npz_without_validation_holds_out_a_fraction(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((100, 3, 8, 8), np.float32), y=np.arange(100) % 4)
    data = load_npz(path, val_fraction=0.2)
    assert len(data.x_train) == 80 and len(data.x_val) == 20 and data.in_channels == 3


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.zeros((4, 8, 8))}, "has no array 'y'"),
        ({"x": np.zeros(4), "y": np.zeros(4, int)}, "must be (N, F) features, (N, H, W)"),
        ({"x": np.zeros((4, 8, 8)), "y": np.zeros(5, int)}, "has 4 samples but 'y' has 5"),
        ({"x": np.zeros((4, 8, 8)), "y": np.zeros(4)}, "1-D integer array"),
        ({"x": np.full((4, 8, 8), np.nan), "y": np.zeros(4, int)}, "NaN"),
        ({"x": np.zeros((4, 8, 8)), "y": -np.ones(4, int)}, "negative class ids"),
        ({"x": np.zeros((4, 8, 8)), "y": np.zeros(4, int), "x_val": np.zeros((2, 8, 8))},
         "must be given together"),
        ({"x": np.zeros((4, 8, 8)), "y": np.zeros(4, int), "x_val": np.zeros((2, 9, 9)),
          "y_val": np.zeros(2, int)}, "x_val samples have shape"),
    ],
)
def test_malformed_npz_gives_a_clear_error(tmp_path, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_npz(path)


def test_not_an_npz_and_missing_file(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_text("hello")
    with pytest.raises(DataError, match="not a readable .npz"):
        load_npz(junk)
    with pytest.raises(DataError, match="does not exist"):
        load_npz(tmp_path / "missing.npz")


def test_pickled_object_arrays_are_refused_not_unpickled(tmp_path):
    path = tmp_path / "obj.npz"
    np.savez(path, x=np.array([{"a": 1}], dtype=object), y=np.zeros(1, int))
    with pytest.raises(DataError, match="not a readable .npz"):
        load_npz(path)


def test_synthetic_set_is_deterministic_and_cached(tmp_path, monkeypatch):
    a = synthetic_images(n_train=64, n_val=16, seed=3)
    b = synthetic_images(n_train=64, n_val=16, seed=3)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_val, b.y_val)
    monkeypatch.setenv("ORCHESTRATOR_CACHE", str(tmp_path))
    first = cached_synthetic_images(n_train=64, n_val=16)
    assert len(list(tmp_path.glob("synthetic-*.npz"))) == 1
    again = cached_synthetic_images(n_train=64, n_val=16)
    np.testing.assert_array_equal(first.x_train, again.x_train)
