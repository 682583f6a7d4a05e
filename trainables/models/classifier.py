"""The built-in classifier: a small VGG-style CNN for signals, images or volumes (Conv1d/2d/3d
by the data's spatial dims), and an MLP for feature vectors; width and patch are knobs."""

from __future__ import annotations

from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.models.blocks import CheckpointedSequential

_LAYERS = {  # spatial dims -> (conv, batch norm, max pool, global average pool)
    1: (nn.Conv1d, nn.BatchNorm1d, nn.MaxPool1d, nn.AdaptiveAvgPool1d),
    2: (nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d, nn.AdaptiveAvgPool2d),
    3: (nn.Conv3d, nn.BatchNorm3d, nn.MaxPool3d, nn.AdaptiveAvgPool3d),
}


def _conv_block(c_in: int, c_out: int, pool: bool, convs: int = 2, dims: int = 2) -> nn.Sequential:
    conv, norm, max_pool, _ = _LAYERS[dims]
    layers: list[nn.Module] = []
    for i in range(convs):
        layers += [
            conv(c_in if i == 0 else c_out, c_out, 3, padding=1, bias=False),
            norm(c_out),
            nn.ReLU(inplace=True),
        ]
    if pool:
        # ceil_mode: a side of 1 (a short signal, a small patch) stays 1 instead of vanishing.
        layers.append(max_pool(2, ceil_mode=True))
    return nn.Sequential(*layers)


def build_classifier(cfg: TrialConfig, meta: DataMeta) -> nn.Module:
    """A small VGG-style CNN: conv blocks of 16/32/64 x width channels, then global pooling.

    The full-resolution block has one conv (the costly resolution), the pooled ones two.
    Global average pooling makes it accept any patch size, so patch_size is a free knob.
    Feature vectors (spatial_dims 0) get an MLP of the same widths.
    """
    c1, c2, c3 = (max(4, round(c * cfg.width)) for c in (16, 32, 64))
    if meta.spatial_dims == 0:
        return nn.Sequential(
            nn.Linear(meta.in_channels, c2 * 2), nn.BatchNorm1d(c2 * 2), nn.ReLU(inplace=True),
            nn.Linear(c2 * 2, c3), nn.ReLU(inplace=True), nn.Linear(c3, meta.num_classes))
    dims = meta.spatial_dims
    features = CheckpointedSequential(
        _conv_block(meta.in_channels, c1, pool=True, convs=1, dims=dims),
        _conv_block(c1, c2, pool=True, dims=dims),
        _conv_block(c2, c3, pool=False, dims=dims),
        checkpointing=cfg.grad_checkpointing,
    )
    head = nn.Sequential(_LAYERS[dims][3](1), nn.Flatten(), nn.Linear(c3, meta.num_classes))
    return nn.Sequential(features, head)
