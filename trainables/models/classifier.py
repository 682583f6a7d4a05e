"""The built-in 2D image classifier: a small VGG-style CNN whose width and input patch are knobs."""

from __future__ import annotations

from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.models.blocks import CheckpointedSequential


def _conv_block(c_in: int, c_out: int, pool: bool, convs: int = 2) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(convs):
        layers += [
            nn.Conv2d(c_in if i == 0 else c_out, c_out, 3, padding=1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
        ]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


def build_classifier(cfg: TrialConfig, meta: DataMeta) -> nn.Module:
    """A small VGG-style CNN: conv blocks of 16/32/64 x width channels, then global pooling.

    The full-resolution block has one conv (the costly resolution), the pooled ones two.

    Global average pooling makes it accept any patch size, so patch_size is a free knob.
    """
    c1, c2, c3 = (max(4, round(c * cfg.width)) for c in (16, 32, 64))
    features = CheckpointedSequential(
        _conv_block(meta.in_channels, c1, pool=True, convs=1),
        _conv_block(c1, c2, pool=True),
        _conv_block(c2, c3, pool=False),
        checkpointing=cfg.grad_checkpointing,
    )
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c3, meta.num_classes))
    return nn.Sequential(features, head)
