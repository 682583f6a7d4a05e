"""3D data: synthetic volumes, the .npy folder loader, and sliding-window inference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainables.data.arrays import DataError
from trainables.loop.validate import sliding_window, window_starts
from trainables.data.volumes import CHUNK, load_volume_folder, synthetic_volume, synthetic_volumes


def test_synthetic_volumes_are_deterministic_chunks_with_labels():
    a, b = synthetic_volumes(n_train=1, n_val=1, size=48), synthetic_volumes(n_train=1, n_val=1, size=48)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert a.x_train.shape[1:] == (1, CHUNK, CHUNK, CHUNK) and a.y_train.shape == a.x_train.shape
    assert a.x_val.shape == (1, 1, 48, 48, 48) and a.num_classes == 2
    assert 0.01 < a.y_train.mean() < 0.5  # foreground is present but not everywhere


def _whole_volume_reference(size, rng):
    """synthetic_volume as first written: every object evaluated over the whole volume."""
    n_objects = 40 if size >= 48 else max(3, round(40 * (size / 48) ** 3))
    grid = np.stack(np.meshgrid(*([np.arange(size)] * 3), indexing="ij"), -1).astype(np.float32)
    image = rng.normal(0.0, 0.35, (size, size, size)).astype(np.float32)
    mask = np.zeros((size, size, size), np.uint8)
    for k in range(n_objects):
        center, radii = rng.uniform(4, size - 4, 3), rng.uniform(4, 9, 3)
        r = np.sqrt((((grid - center) / radii) ** 2).sum(-1))
        if k % 3 == 2:
            image += 0.6 * (r < 1.0)
            continue
        image += 0.5 * (r < 0.8) + 1.2 * ((r >= 0.8) & (r < 1.1))
        mask |= (r < 0.8).astype(np.uint8)
    return image, mask


@pytest.mark.parametrize(("size", "seed"), [(64, 77), (48, 1), (24, 5), (16, 9)])
def test_synthetic_volume_draws_each_object_in_its_box_as_over_the_whole_volume(size, seed):
    # Objects reach the volume's edges at every size here: a box cut one voxel short, or a
    # changed draw order, changes the data (and every digest an earlier search is keyed by).
    image, mask = synthetic_volume(size, np.random.default_rng(seed))
    ref_image, ref_mask = _whole_volume_reference(size, np.random.default_rng(seed))
    np.testing.assert_array_equal(image, ref_image)
    np.testing.assert_array_equal(mask, ref_mask)


def _write_volumes(root, count, shape=(40, 40, 40), bad_label=False):
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(count):
        np.save(root / "images" / f"v{i}.npy", rng.normal(size=shape).astype(np.float32))
        lab = (rng.random(shape) > 0.8).astype(np.uint8)
        np.save(root / "labels" / f"v{i}.npy", lab[:-1] if bad_label else lab)


def test_volume_folder_loads_and_holds_out_the_last_volume(tmp_path):
    _write_volumes(tmp_path, 3)
    data = load_volume_folder(tmp_path)
    assert data.x_val.shape == (1, 1, 40, 40, 40)
    assert data.x_train.shape[1:] == (1, CHUNK, CHUNK, CHUNK) and data.y_train.dtype == np.int64


@pytest.mark.parametrize(("count", "bad_label", "message"), [
    (1, False, "too few"),
    (3, True, "must be the same"),
])
def test_volume_folder_errors(tmp_path, count, bad_label, message):
    _write_volumes(tmp_path, count, bad_label=bad_label)
    with pytest.raises(DataError, match=message):
        load_volume_folder(tmp_path)
    with pytest.raises(DataError, match="images/"):
        load_volume_folder(tmp_path / "nowhere")


def test_sliding_window_covers_every_voxel_and_matches_a_pointwise_model():
    assert window_starts(40, 16) == [0, 8, 16, 24]
    assert window_starts(37, 16)[-1] == 21
    volume = torch.randn(1, 1, 37, 30, 20)
    # A 1x1x1 conv is pointwise: averaged overlapping windows must equal one whole-volume pass.
    model = torch.nn.Conv3d(1, 2, 1)
    with torch.no_grad():
        torch.testing.assert_close(sliding_window(model, volume, 16, windows_per_batch=5),
                                   model(volume))
