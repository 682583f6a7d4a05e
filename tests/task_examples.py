"""Tasks for the tests: one that records what the loop does with it, and four that cannot train,
each wrong in one way the preflight names (orchestrator/task_check.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Recording:
    """SGD with momentum, a cosine schedule, a loss that records whether autocast wraps it, and
    a score of its own (accuracy scaled into [0.5, 1]: nobody else's score looks like it)."""

    def __init__(self):
        self.optimizers: list[torch.optim.Optimizer] = []
        self.autocast_in_loss: list[tuple[bool, torch.dtype]] = []
        self.augmented = 0

    def model(self, cfg, meta) -> nn.Module:
        c = max(4, round(8 * cfg.width))
        return nn.Sequential(nn.Conv2d(meta.in_channels, c, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(c, meta.num_classes))

    def loss(self, outputs, batch):
        if torch.is_grad_enabled():  # a training step's (validation's is scored apart)
            self.autocast_in_loss.append((torch.is_autocast_enabled(outputs.device.type),
                                          outputs.dtype))
        return F.cross_entropy(outputs.float(), batch[1])

    def optimizer(self, params, cfg):
        optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9)
        self.optimizers.append(optimizer)
        return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, cfg.total_steps)

    def augment(self, batch):
        self.augmented += 1
        return batch[0].flip(-1), batch[1]

    def score(self, outputs, batch):
        return 0.5 + 0.5 * (outputs.argmax(1) == batch[1]).float().mean()


class Small(Recording):
    """The same task, no recording kept across processes (what a search pickles)."""


class NoLoss:
    def model(self, cfg, meta):
        return nn.Sequential(nn.Flatten(), nn.LazyLinear(meta.num_classes))

    def optimizer(self, params, cfg):
        return torch.optim.SGD(params, lr=cfg.lr)

    def score(self, outputs, batch):
        return 1.0


class VectorLoss(Small):
    def loss(self, outputs, batch):
        return F.cross_entropy(outputs, batch[1], reduction="none")  # one per sample


class TextScore(Small):
    def score(self, outputs, batch):
        return "good"


class HalfOptimizer(Small):
    def optimizer(self, params, cfg):
        return torch.optim.SGD(list(params)[:1], lr=cfg.lr)  # the first tensor only
