"""Model builders. `MODELS` is a plain registry: name -> builder(config, data_meta) -> nn.Module.

Every model is a sequence of blocks so that gradient checkpointing can wrap each block the same
way, whatever the model (see `CheckpointedSequential`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainables.config import TrialConfig


@dataclass(frozen=True)
class DataMeta:
    """What a builder and the loop need to know about the data."""

    in_channels: int
    num_classes: int
    task: str = "classify"
    """'classify' (y is one class id per sample) or 'segment' (y is a label volume)."""
    spatial_dims: int = 2


class CheckpointedSequential(nn.Sequential):
    """nn.Sequential whose blocks can recompute their activations in backward.

    With checkpointing on, each block keeps only its input for backward and re-runs its forward
    then: activation memory drops from every intermediate tensor to one per block.
    """

    def __init__(self, *blocks: nn.Module, checkpointing: bool = False):
        super().__init__(*blocks)
        self.checkpointing = checkpointing

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self:
            if self.checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x


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


ModelBuilder = Callable[[TrialConfig, DataMeta], nn.Module]

def build_unet3d(cfg: TrialConfig, meta: DataMeta) -> nn.Module:
    from trainables.unet3d import build_unet3d as build  # imports this module: import late

    return build(cfg, meta)


MODELS: dict[str, ModelBuilder] = {
    "classifier": build_classifier,
    "unet3d": build_unet3d,
}


def build_model(cfg: TrialConfig, meta: DataMeta, builder: ModelBuilder | None = None) -> nn.Module:
    """The model for `cfg.workload`, or `builder` (a user's own) when one is given."""
    if builder is not None:
        model = builder(cfg, meta)
        if not isinstance(model, nn.Module):
            raise TypeError(f"model builder {builder!r} returned {type(model).__name__}, "
                            "not a torch.nn.Module")
        return model
    if cfg.workload not in MODELS and ":" in cfg.workload:
        # A user's own builder by 'module:function', imported where the worker runs (the
        # module must be importable there, e.g. shipped with `--working-dir`).
        import importlib

        module, _, name = cfg.workload.partition(":")
        return getattr(importlib.import_module(module), name)(cfg, meta)
    if cfg.workload not in MODELS:
        raise ValueError(f"unknown workload {cfg.workload!r}; known: {sorted(MODELS)}")
    return MODELS[cfg.workload](cfg, meta)
