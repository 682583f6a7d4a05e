"""Data of any shape (issue 12): feature vectors, 1D signals, 2D images and 3D volumes all load,
crop, build a model and train through the same loop and switches. No Ray."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.trainables.helpers import fit_local
from trainables.config import TrialConfig
from trainables.data.arrays import DataError, from_arrays, with_spatial_dims
from trainables.data.crops import center_crop, random_crop
from trainables.loop.switches import memory_format_for
from trainables.models import build_classifier


def signals_npz(path, *, n=160, channels=3, length=32, classes=2, seed=0) -> str:
    """Class 1 carries a sine burst in channel 0; class 0 is noise. (N, C, L)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.normal(0, 0.3, (n, channels, length)).astype(np.float32)
    x[y == 1, 0] += np.sin(np.linspace(0, 6 * np.pi, length)).astype(np.float32) * 1.5
    np.savez(path, x=x, y=y)
    return str(path)


def features_npz(path, *, n=160, features=10, seed=0) -> str:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(0, 0.5, (n, features)).astype(np.float32)
    x[:, 0] += 2.0 * y
    np.savez(path, x=x, y=y)
    return str(path)


@pytest.mark.parametrize(("shape", "dims", "expect"), [
    ((8, 10), None, (8, 10)), ((8, 3, 20), 1, (8, 3, 20)), ((8, 20), 1, (8, 1, 20)),
    ((8, 16, 16), None, (8, 1, 16, 16)), ((8, 16, 16), 2, (8, 1, 16, 16)),
    ((8, 2, 6, 6, 6), None, (8, 2, 6, 6, 6)), ((8, 6, 6, 6), 3, (8, 1, 6, 6, 6)),
])
def test_spatial_dims_reads_each_shape(shape, dims, expect):
    data = from_arrays({"x": np.zeros(shape, np.float32), "y": np.arange(shape[0]) % 2})
    data = with_spatial_dims(data, dims)
    assert data.x_train.shape[1:] == expect[1:]
    assert data.meta().spatial_dims == len(expect) - 2


def test_spatial_dims_that_cannot_fit_the_shape_is_one_clear_error():
    data = from_arrays({"x": np.zeros((8, 10), np.float32), "y": np.arange(8) % 2})
    with pytest.raises(DataError, match="cannot be read with spatial_dims=3"):
        with_spatial_dims(data, 3)


@pytest.mark.parametrize("shape", [(4, 3, 20), (4, 2, 12, 12), (4, 1, 8, 8, 8)])
def test_crops_cut_every_spatial_axis_and_none_keeps_the_sample(shape):
    x = torch.randn(shape)
    out = random_crop(x, 4, torch.Generator().manual_seed(0))
    assert out.shape == shape[:2] + (4,) * (len(shape) - 2)
    assert center_crop(x, 4).shape == out.shape
    assert random_crop(x, None) is x and center_crop(x, None) is x


@pytest.mark.parametrize(("dims", "shape"), [(0, (5, 10)), (1, (5, 3, 9)), (2, (5, 3, 9, 9)),
                                             (3, (5, 3, 6, 6, 6))])
def test_classifier_builds_for_every_spatial_dim(dims, shape):
    from trainables.data.arrays import DataMeta

    meta = DataMeta(in_channels=shape[1], num_classes=4, spatial_dims=dims)
    model = build_classifier(TrialConfig(width=0.5), meta)
    assert model(torch.randn(shape)).shape == (5, 4)
    fmt = memory_format_for(TrialConfig(channels_last=True), meta)
    assert (fmt != torch.contiguous_format) == (dims in (2, 3))  # channels_last: 2D/3D only


@pytest.mark.parametrize("settings", [
    {}, {"precision": "bf16-mixed", "accum_steps": 2, "grad_clip": 1.0, "schedule": "cosine"},
    {"channels_last": True, "grad_checkpointing": True},
])
def test_signals_train_through_the_loop_with_every_switch(tmp_path, settings):
    path = signals_npz(tmp_path / "sig.npz")
    result = fit_local(path, spatial_dims=1, epochs=4, batch_size=16, lr=0.01, patch_size=24,
                       width=0.5, **settings)
    assert result["val_accuracy"] > 0.8, result


def test_feature_vectors_train_an_mlp_without_crops(tmp_path):
    path = features_npz(tmp_path / "feat.npz")
    result = fit_local(path, epochs=4, batch_size=16, lr=0.01, patch_size=None, width=0.5)
    assert result["val_accuracy"] > 0.8, result
