"""Tasks: cropping, loss and validation scores for classification and segmentation (no Ray)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from trainables.loop.tasks import (ClassifyTask, SegmentTask, make_task, sliding_window,
                                   window_starts)

NO_AUTOCAST = contextlib.nullcontext


def _identity_reduce(t):
    return t


class ClassFromPixels(nn.Module):
    """Reads the class id written into every pixel: a perfect classifier of that data."""

    def __init__(self, classes: int, wrong: bool = False):
        super().__init__()
        self.classes, self.wrong = classes, wrong

    def forward(self, x):
        k = x[:, 0].mean(dim=(1, 2)).round().long()
        if self.wrong:
            k = (k + 1) % self.classes
        return nn.functional.one_hot(k, self.classes).float() * 20


class VoxelsAsLogits(nn.Module):
    """Foreground logit = the input voxel (a 0/1 mask): a perfect segmenter of that data."""

    def forward(self, x):
        return torch.cat([1 - x, x], 1) * 20


def _class_batches(classes=3, n=12, size=8):
    y = torch.arange(n) % classes
    x = y.float().view(n, 1, 1, 1).expand(n, 1, size, size).clone()
    return lambda: iter([(x[:6], y[:6]), (x[6:], y[6:])])


def test_window_starts_cover_every_voxel_half_overlapping():
    assert window_starts(10, 4) == [0, 2, 4, 6]
    assert window_starts(11, 4) == [0, 2, 4, 6, 7]  # the last one flush with the end
    assert window_starts(3, 4) == [0] and window_starts(4, 4) == [0]
    for extent, size in [(10, 4), (11, 4), (17, 8), (9, 2)]:
        covered = {i for s in window_starts(extent, size) for i in range(s, s + size)}
        assert covered == set(range(extent))


def test_sliding_window_of_identity_returns_the_volume():
    vol = torch.randn(1, 2, 9, 7, 6)
    # Few windows per batch: the batching across groups is exercised too.
    out = sliding_window(nn.Identity(), vol, 4, windows_per_batch=5)
    assert out.shape == vol.shape
    torch.testing.assert_close(out, vol)


def test_classify_validate_scores_accuracy_on_rank0():
    task = ClassifyTask()
    args = dict(size=6, autocast=NO_AUTOCAST, all_reduce=_identity_reduce,
                memory_format=torch.contiguous_format, device=torch.device("cpu"))
    right = task.validate(ClassFromPixels(3), _class_batches(), is_rank0=True, **args)
    assert right["val_accuracy"] == right["val_score"] == 1.0 and right["val_loss"] < 1e-6
    wrong = task.validate(ClassFromPixels(3, wrong=True), _class_batches(), is_rank0=True, **args)
    assert wrong["val_score"] == 0.0 and wrong["val_loss"] > 10
    # Other ranks add zeros (the all-reduce hands them rank 0's sums in a worker group).
    other = task.validate(ClassFromPixels(3), _class_batches(), is_rank0=False, **args)
    assert other["val_score"] == 0.0


def test_classify_crop_keeps_labels_and_crops_images():
    x, y = torch.randn(4, 1, 10, 10), torch.arange(4)
    cx, cy = ClassifyTask().crop(x, y, 6, torch.Generator().manual_seed(0))
    assert cx.shape == (4, 1, 6, 6) and torch.equal(cy, y)


def test_segment_crop_takes_the_same_window_of_image_and_labels():
    y = (torch.rand(3, 1, 8, 8, 8) > 0.5).long()
    x = torch.cat([y.float(), torch.ones_like(y, dtype=torch.float)], 1)  # image channel 0 = labels
    cx, cy = SegmentTask().crop(x, y, 4, torch.Generator().manual_seed(1))
    assert cx.shape == (3, 2, 4, 4, 4) and cy.shape == (3, 4, 4, 4)
    assert torch.equal(cx[:, 0].long(), cy)


def test_segment_validate_scores_dice_and_iou():
    y = torch.zeros(2, 1, 8, 8, 8, dtype=torch.long)
    y[:, :, 2:6, 2:6, 2:6] = 1
    batches = lambda: iter([(y.float(), y)])  # noqa: E731 - the image is its own mask
    args = dict(size=4, autocast=NO_AUTOCAST, all_reduce=_identity_reduce,
                memory_format=torch.contiguous_format, device=torch.device("cpu"),
                is_rank0=True)
    perfect = SegmentTask().validate(VoxelsAsLogits(), batches, **args)
    assert perfect["val_dice"] == perfect["val_iou"] == perfect["val_score"] == 1.0

    class Nothing(nn.Module):  # predicts background everywhere
        def forward(self, x):
            return torch.cat([x * 0 + 20, x * 0], 1)

    none = SegmentTask().validate(Nothing(), batches, **args)
    assert none["val_dice"] == none["val_iou"] == 0.0


def test_make_task_names_the_known_tasks():
    assert isinstance(make_task("classify"), ClassifyTask)
    assert isinstance(make_task("segment"), SegmentTask)
    with pytest.raises(ValueError, match="unknown task 'regress'"):
        make_task("regress")
