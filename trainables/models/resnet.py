"""A ResNet-18-shaped classifier (He et al. 2016) for CIFAR-shaped images: the workload a GPU is
for, its pace set by its convolutions' arithmetic rather than by kernel launches.

The CIFAR variant: a 3x3 stem at full resolution (no 7x7 stride-2 stem, no max pool), four
stages of two basic blocks at 64/128/256/512 x width channels, the last three halving the
resolution, then global average pooling. Width scales every stage; gradient checkpointing
recomputes each stage in backward.
"""

from __future__ import annotations

import torch
from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.models.blocks import CheckpointedSequential


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out))
        self.shortcut = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.body(x) + self.shortcut(x))


def build_resnet18(cfg: TrialConfig, meta: DataMeta) -> nn.Module:
    if meta.spatial_dims != 2:
        raise ValueError(f"resnet18 classifies images (2 spatial dims), not data with "
                         f"{meta.spatial_dims}")
    widths = [max(8, round(c * cfg.width)) for c in (64, 128, 256, 512)]
    stages, c_in = [], widths[0]
    for i, c in enumerate(widths):
        stride = 1 if i == 0 else 2
        stages.append(nn.Sequential(BasicBlock(c_in, c, stride), BasicBlock(c, c, 1)))
        c_in = c
    stem = nn.Sequential(nn.Conv2d(meta.in_channels, widths[0], 3, padding=1, bias=False),
                         nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True))
    return nn.Sequential(
        stem, CheckpointedSequential(*stages, checkpointing=cfg.grad_checkpointing),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(widths[-1], meta.num_classes))
