from __future__ import annotations

import pytest
import torch

from trainables.data.crops import center_crop, random_crop


@pytest.mark.parametrize("shape", [(64, 2, 20, 24), (16, 1, 12, 10, 14)])
def test_random_crops_stay_in_bounds_and_differ_per_sample(shape):
    # Each voxel holds its own flat index, so a crop's values tell where it came from.
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).view(shape)
    size = 8
    out = random_crop(x, size, torch.Generator().manual_seed(0))
    assert out.shape == (*shape[:2], *([size] * (len(shape) - 2)))
    starts = set()
    for i in range(shape[0]):
        corner = int(out[i, 0].flatten()[0])
        coords = torch.unravel_index(torch.tensor(corner), shape)
        assert int(coords[0]) == i
        for d, extent in enumerate(shape[2:]):
            assert 0 <= int(coords[2 + d]) <= extent - size
        # The crop is a contiguous block of the original sample.
        slices = [i, slice(None)] + [slice(int(c), int(c) + size) for c in coords[2:]]
        torch.testing.assert_close(out[i], x[tuple(slices)])
        starts.add(tuple(int(c) for c in coords[2:]))
    assert len(starts) > 1


def test_center_crop_and_too_large_patches():
    x = torch.zeros(2, 1, 10, 10)
    assert center_crop(x, 6).shape == (2, 1, 6, 6)
    with pytest.raises(ValueError, match="patch_size 12"):
        random_crop(x, 12)
    with pytest.raises(ValueError, match="patch_size 12"):
        center_crop(x, 12)
