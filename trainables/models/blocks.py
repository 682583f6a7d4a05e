"""Building blocks every model shares.

Every model is a sequence of blocks so that gradient checkpointing can wrap each block the same
way, whatever the model.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


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
