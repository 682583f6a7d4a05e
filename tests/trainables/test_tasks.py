"""Tasks (trainables/loop/task.py) and validation (trainables/loop/validate.py): crops, losses
and validation scores for classification and segmentation, a score summed as counts (no Ray)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from trainables.data.crops import crop_batch
from trainables.loop.task import ClassifyTask, ModelTask, SegmentTask, task_for
from trainables.loop.validate import sliding_window, validate, window_starts

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


def _validate(model, task, batches, kind, size, is_rank0=True):
    return validate(model, task, batches, size, kind, NO_AUTOCAST, _identity_reduce,
                    torch.contiguous_format, torch.device("cpu"), is_rank0)


def test_classify_validate_scores_accuracy_on_rank0():
    task = ClassifyTask()
    right = _validate(ClassFromPixels(3), task, _class_batches(), "classify", 6)
    assert right["val_accuracy"] == right["val_score"] == 1.0 and right["val_loss"] < 1e-6
    wrong = _validate(ClassFromPixels(3, wrong=True), task, _class_batches(), "classify", 6)
    assert wrong["val_score"] == 0.0 and wrong["val_loss"] > 10
    # Other ranks send zeros (the all-reduce hands them rank 0's score in a worker group).
    other = _validate(ClassFromPixels(3), task, _class_batches(), "classify", 6, is_rank0=False)
    assert other["val_score"] == 0.0


def test_classify_crop_keeps_labels_and_crops_images():
    x, y = torch.randn(4, 1, 10, 10), torch.arange(4)
    cx, cy = crop_batch("classify", x, y, 6, torch.Generator().manual_seed(0))
    assert cx.shape == (4, 1, 6, 6) and torch.equal(cy, y)


def test_segment_crop_takes_the_same_window_of_image_and_labels():
    y = (torch.rand(3, 1, 8, 8, 8) > 0.5).long()
    x = torch.cat([y.float(), torch.ones_like(y, dtype=torch.float)], 1)  # image channel 0 = labels
    cx, cy = crop_batch("segment", x, y, 4, torch.Generator().manual_seed(1))
    assert cx.shape == (3, 2, 4, 4, 4) and cy.shape == (3, 1, 4, 4, 4)
    assert torch.equal(cx[:, :1].long(), cy)


def test_segment_validate_scores_dice_and_iou():
    y = torch.zeros(2, 1, 8, 8, 8, dtype=torch.long)
    y[:, :, 2:6, 2:6, 2:6] = 1
    batches = lambda: iter([(y.float(), y)])  # noqa: E731 - the image is its own mask
    perfect = _validate(VoxelsAsLogits(), SegmentTask(), batches, "segment", 4)
    assert perfect["val_dice"] == perfect["val_iou"] == perfect["val_score"] == 1.0

    class Nothing(nn.Module):  # predicts background everywhere
        def forward(self, x):
            return torch.cat([x * 0 + 20, x * 0], 1)

    none = _validate(Nothing(), SegmentTask(), batches, "segment", 4)
    assert none["val_dice"] == none["val_iou"] == 0.0


class MacroF1:
    """A score summed as counts: per class (tp, fp, fn), made into macro-F1 at the end."""

    score_reduction = "sum"

    def score(self, outputs, batch):
        pred, y = outputs.argmax(1), batch[1]
        return torch.stack([torch.stack([((pred == k) & (y == k)).sum(),
                                         ((pred == k) & (y != k)).sum(),
                                         ((pred != k) & (y == k)).sum()]) for k in range(3)])

    def finish_score(self, counts):
        tp, fp, fn = counts.double().unbind(1)
        return float((2 * tp / (2 * tp + fp + fn).clamp(min=1)).mean())

    def loss(self, outputs, batch):
        return nn.functional.cross_entropy(outputs, batch[1])


def test_a_score_summed_as_counts_is_made_into_the_score_once_over_the_whole_set():
    """Macro-F1 of a set is not the mean of its batches' macro-F1: a batch that predicts class
    0 for all three scores 1/6, one all right scores 1 (mean 7/12); over the set every class
    has F1 2/3."""
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    x = torch.tensor([0, 0, 0, 0, 1, 2]).float().view(6, 1, 1, 1).expand(6, 1, 4, 4).clone()
    batches = lambda: iter([(x[:3], y[:3]), (x[3:], y[3:])])  # noqa: E731
    found = _validate(ClassFromPixels(3), MacroF1(), batches, "classify", None)
    assert found["val_score"] == pytest.approx(2 / 3)


def test_the_task_a_trial_trains():
    """Yours, else your model with the built-in rest for the data's kind, else the built-in."""
    mine = MacroF1()
    assert task_for("custom", "classify", task=mine) is mine
    build = lambda cfg, meta: nn.Linear(2, 2)  # noqa: E731
    short = task_for("custom", "segment", builder=build)
    assert isinstance(short, ModelTask) and short.score_reduction == "sum"
    assert short.loss.__self__.__class__ is SegmentTask  # the built-in rest
    assert isinstance(task_for("classifier", "classify"), ClassifyTask)
    assert isinstance(task_for("unet3d", "segment"), SegmentTask)
