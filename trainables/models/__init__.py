"""Models: shared blocks (`blocks`), the 2D classifier and the 3D UNet.

A model builder is a function (TrialConfig, DataMeta) -> nn.Module; `trainables.workloads` maps
workload names to builders, and a user's own builder plugs in the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.models.blocks import CheckpointedSequential
from trainables.models.classifier import build_classifier
from trainables.models.unet3d import build_unet3d

ModelBuilder = Callable[[TrialConfig, DataMeta], nn.Module]

__all__ = ["CheckpointedSequential", "ModelBuilder", "build_classifier", "build_unet3d"]
