"""A small 3D UNet for volume segmentation (a MONAI-style UNet, as used for mitochondria in EM volumes).

Base filter count = round(8 * width): width 0.5 halves every layer's filters. Two poolings, so
patch sides must be multiples of 4.
"""

from __future__ import annotations

import torch
from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.models.blocks import CheckpointedSequential


def _double_conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv3d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm3d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv3d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm3d(c_out),
        nn.ReLU(inplace=True),
    )


class UNet3D(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, base: int, checkpointing: bool):
        super().__init__()
        c1, c2, c3 = base, 2 * base, 4 * base
        # Each level is a CheckpointedSequential of one block, so gradient checkpointing
        # recomputes level by level (the full-resolution levels hold most activation memory).
        self.enc1 = CheckpointedSequential(_double_conv(in_channels, c1), checkpointing=checkpointing)
        self.enc2 = CheckpointedSequential(_double_conv(c1, c2), checkpointing=checkpointing)
        self.mid = CheckpointedSequential(_double_conv(c2, c3), checkpointing=checkpointing)
        self.up2 = nn.ConvTranspose3d(c3, c2, 2, stride=2)
        self.dec2 = CheckpointedSequential(_double_conv(2 * c2, c2), checkpointing=checkpointing)
        self.up1 = nn.ConvTranspose3d(c2, c1, 2, stride=2)
        self.dec1 = CheckpointedSequential(_double_conv(2 * c1, c1), checkpointing=checkpointing)
        self.head = nn.Conv3d(c1, num_classes, 1)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


def build_unet3d(cfg: TrialConfig, meta: DataMeta) -> nn.Module:
    if cfg.patch_size % 4:
        raise ValueError(f"unet3d needs patch_size divisible by 4 (got {cfg.patch_size})")
    base = max(2, round(8 * cfg.width))
    return UNet3D(meta.in_channels, meta.num_classes, base, cfg.grad_checkpointing)
