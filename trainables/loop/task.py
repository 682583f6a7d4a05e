"""What is trained: the model, its loss, its optimizer, its augmentation and its score.

A `Task` is your training, as the loop runs it with every speed switch applied (autocast around
your forward and loss, channels_last, compile, the batch and its lr scaling, accumulation,
data-parallel workers, the Ray Data feed). It is five methods, one of them optional:

    model(cfg, meta) -> nn.Module           your model for this trial's settings (cfg.width...)
    loss(outputs, batch) -> Tensor          a scalar: the batch's training loss
    optimizer(params, cfg) -> Optimizer | (Optimizer, scheduler | None)
                                            built with cfg.lr, the peak lr already scaled to
                                            this trial's batch; the scheduler is stepped once
                                            per optimizer step (cfg.total_steps of them)
    score(outputs, batch) -> number | Tensor
                                            the validation score of a batch, higher is better
    augment(batch) -> batch                 optional: runs on the device, inside the timed step

`batch` is `(x, y)`, on the trial's device; `outputs` is what `model(x)` returned. A score is
averaged over the validation set, weighted by batch size (`score_reduction = "mean"`, the
default), or summed (`"sum"`: counts, such as true and false positives per class) and turned
into the score by `finish_score(total)`: F1 and IoU are not means of per-batch values. An
optional `details(total) -> dict` names more metrics beside `val_score` (val_dice, val_iou).

The built-in workloads are two tasks (`ClassifyTask`, `SegmentTask`); `--model module:function`
is the short form of a task with your model and the built-in rest (`ModelTask`). A task is
checked with one tiny batch before any work (orchestrator/task_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.loop.lr import scaled_lr, schedule_multiplier
from trainables.models import ModelBuilder
from trainables.workloads import WORKLOADS

Batch = tuple[torch.Tensor, torch.Tensor]
REQUIRED = ("model", "loss", "optimizer", "score")


@dataclass(frozen=True)
class OptimizerConfig:
    """What a task's optimizer is built with: the trial's settings, the lr scaled to its batch,
    and the length of its schedule."""

    lr: float
    """The peak learning rate at this trial's batch (`lr` scaled by `lr_scaling`)."""
    weight_decay: float
    total_steps: int
    """Optimizer steps of the whole run: what a schedule spans."""
    steps_per_epoch: int
    trial: TrialConfig = field(repr=False)
    """Every setting of the trial (batch_size, schedule, epochs, ...)."""

    @classmethod
    def of(cls, cfg: TrialConfig, steps_per_epoch: int) -> OptimizerConfig:
        steps = max(1, steps_per_epoch // cfg.accum_steps)
        return cls(scaled_lr(cfg), cfg.weight_decay, steps * cfg.epochs, steps, cfg)

    def __getattr__(self, name: str) -> Any:  # cfg.batch_size, cfg.epochs, ... as a trial's
        return getattr(self.trial, name)


@runtime_checkable
class Task(Protocol):
    def model(self, cfg: TrialConfig, meta: DataMeta) -> nn.Module: ...

    def loss(self, outputs: Any, batch: Batch) -> torch.Tensor: ...

    def optimizer(self, params, cfg: OptimizerConfig): ...

    def score(self, outputs: Any, batch: Batch) -> float | torch.Tensor: ...


def optimizer_and_schedule(task, params, cfg: OptimizerConfig):
    """(optimizer, scheduler or None) from what a task's `optimizer` returned."""
    built = task.optimizer(params, cfg)
    optimizer, scheduler = built if isinstance(built, tuple) else (built, None)
    return optimizer, scheduler


def reduction(task) -> Literal["mean", "sum"]:
    return getattr(task, "score_reduction", "mean")


def finish(task, total: torch.Tensor | float, count: int) -> tuple[float, dict[str, float]]:
    """The validation score and its named details from the summed batch scores (`total`) of
    `count` samples."""
    if reduction(task) == "sum":
        score = float(task.finish_score(total))
    else:
        value = total.sum().item() if isinstance(total, torch.Tensor) else float(total)
        score = total = value / max(count, 1)
    details = task.details(total) if hasattr(task, "details") else {}
    return score, {k: float(v) for k, v in details.items()}


def name_of(task) -> str:
    """'module:Class' of a task (what MLflow records as the search's `task`)."""
    if isinstance(task, ModelTask):
        return f"{task.kind} task with model {_qualname(task.builder)}"
    return _qualname(type(task))


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


# -- the built-in tasks -------------------------------------------------------------------------
class BuiltinTask:
    """The built-in rest: cross-entropy, AdamW with the trial's schedule (`schedule`: onecycle,
    cosine or constant, with a warm-up where the lr is scaled up: trainables/loop/lr.py)."""

    kind = "classify"
    workload = "classifier"
    """The built-in model of this kind, where a trial's `workload` names none of WORKLOADS."""

    def model(self, cfg: TrialConfig, meta: DataMeta) -> nn.Module:
        name = cfg.workload if cfg.workload in WORKLOADS else self.workload
        return WORKLOADS[name].model(cfg, meta)

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(outputs, batch[1])

    def optimizer(self, params, cfg: OptimizerConfig):
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(
            optimizer, schedule_multiplier(cfg.trial, cfg.total_steps))


class ClassifyTask(BuiltinTask):
    """Classification: y (N,) class ids; score = accuracy."""

    def score(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        return (outputs.argmax(1) == batch[1]).float().mean()

    def details(self, accuracy: float) -> dict[str, float]:
        return {"val_accuracy": accuracy}


class SegmentTask(BuiltinTask):
    """Voxel segmentation: y (N, 1, D, H, W) labels; score = foreground Dice, from the true
    positives, false positives and false negatives summed over the validation set."""

    kind = "segment"
    workload = "unet3d"
    score_reduction = "sum"

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        # Labels may arrive as uint8 (how label volumes travel): the loss wants int64.
        return F.cross_entropy(outputs, _labels(batch[1], outputs))

    def score(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        pred, truth = outputs.argmax(1), _labels(batch[1], outputs)
        return torch.stack([((pred == 1) & (truth == 1)).sum(), ((pred == 1) & (truth != 1)).sum(),
                            ((pred != 1) & (truth == 1)).sum()]).float()

    def finish_score(self, total: torch.Tensor) -> float:
        tp, fp, fn = total.tolist()
        return 2 * tp / max(2 * tp + fp + fn, 1)

    def details(self, total: torch.Tensor) -> dict[str, float]:
        tp, fp, fn = total.tolist()
        return {"val_dice": self.finish_score(total), "val_iou": tp / max(tp + fp + fn, 1)}


def _labels(y: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """Label volumes (N, 1, D, H, W) as the (N, D, H, W) class ids a loss over `outputs`
    wants."""
    if y.dim() == outputs.dim():
        y = y[:, 0]
    return y.long()


TASKS: dict[str, type[BuiltinTask]] = {"classify": ClassifyTask, "segment": SegmentTask}


class ModelTask:
    """Your model with the built-in rest for your data's kind (`--model module:function`)."""

    def __init__(self, builder: ModelBuilder, kind: str = "classify"):
        self.builder, self.kind = builder, kind
        self._rest = TASKS[kind]()
        self.score_reduction = reduction(self._rest)

    def model(self, cfg: TrialConfig, meta: DataMeta) -> nn.Module:
        model = self.builder(cfg, meta)
        if not isinstance(model, nn.Module):
            raise TypeError(f"model builder {self.builder!r} returned "
                            f"{type(model).__name__}, not a torch.nn.Module")
        return model

    def __getattr__(self, name: str):  # loss, optimizer, score, finish_score, details
        if name.startswith("__") or name == "_rest":
            raise AttributeError(name)
        return getattr(self._rest, name)


def schedules_by_setting(task) -> bool:
    """Whether `task`'s learning rate follows the trial's `schedule` setting: the built-in
    rest's (a built-in workload, or your model with it), not an optimizer of your own."""
    return task is None or isinstance(task, (BuiltinTask, ModelTask))


def task_for(cfg_workload: str, kind: str, builder: ModelBuilder | None = None,
             task: Any = None):
    """The task a trial trains: yours, else your model with the built-in rest, else the
    built-in workload's."""
    if task is not None:
        return task
    if builder is not None:
        return ModelTask(builder, kind)
    if cfg_workload not in WORKLOADS:
        from trainables.workloads import load_builder

        return ModelTask(load_builder(cfg_workload), kind)
    return TASKS[kind]()

