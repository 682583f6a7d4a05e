"""Your task, tried on one tiny batch before any work: a task that cannot train fails here, with
one line that names the method and the fix, not an hour later inside a trial.

On the CPU, at the search's fixed settings, with two samples: the model is built, run forward,
its loss computed and backpropagated, its optimizer built (it must cover every parameter that
trains) and stepped once, and a validation batch scored. What cannot be right whatever the
trial (a missing method, a loss that is not a scalar, a score that is not a number, an
optimizer that leaves parameters out) raises a ValueError: the search's one-line refusal, exit
code 2. An error your code raises in the dry run is not refused: it may be the configuration's
(out of memory at some width) or the moment's (a store not mounted yet), which the trials then
report as their own ends; the dry run stops there and says so in a note.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import ArrayData
from trainables.data.crops import center_crop, crop_batch
from trainables.loop.task import REQUIRED, OptimizerConfig, name_of, optimizer_and_schedule

SIGNATURES = {
    "model": "model(cfg, meta) returning the torch.nn.Module to train",
    "loss": "loss(outputs, batch) returning the batch's loss as a scalar tensor",
    "optimizer": "optimizer(params, cfg) returning an optimizer (and a scheduler, or None)",
    "score": "score(outputs, batch) returning the batch's validation score, higher is better",
}
SAMPLES = 2


class Raised(Exception):
    """Your code raised in the dry run: what it said, for the note."""


def check_task(task: Any, data: ArrayData, base: dict[str, Any]) -> str | None:
    """Raise ValueError, naming the method and the fix, where `task` cannot train on `data`; a
    note where your code raised (the rest was not tried), else None."""
    try:
        _check(task, name_of(task), data, base)
    except Raised as raised:
        return f"note: {raised}; the dry run of your task stopped there (the trials will say)"
    return None


def _check(task: Any, name: str, data: ArrayData, base: dict[str, Any]) -> None:
    for method in REQUIRED:
        if not callable(getattr(task, method, None)):
            raise ValueError(f"task {name} has no {method}() method: add "
                             f"{SIGNATURES[method]} (docs/reference.md, 'Your training')")
    cfg = TrialConfig.from_dict({**base, "batch_size": SAMPLES, "workers": 1, "epochs": 1})
    meta = data.meta()
    x, y = _batch(data.x_train, data.y_train)
    x, y = crop_batch(meta.task, x, y, cfg.patch_size, torch.Generator().manual_seed(0))
    torch.manual_seed(cfg.seed)
    model = _call(name, "model", task.model, cfg, meta)
    if not isinstance(model, nn.Module):
        raise ValueError(f"task {name}: model(cfg, meta) returned {type(model).__name__}, not "
                         "a torch.nn.Module")
    if hasattr(task, "augment"):
        x, y = _call(name, "augment", task.augment, (x, y))
    loss = _call(name, "loss", task.loss, _call(name, "model", model, x), (x, y))
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"task {name}: loss(outputs, batch) returned {shape}, not a scalar "
                         "tensor: reduce it to one number (e.g. .mean())")
    _call(name, "loss", loss.backward)
    _optimizer(task, name, model, cfg)
    _score(task, name, model, data, cfg, meta)


def _batch(x, y) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.as_tensor(x[:SAMPLES]), torch.as_tensor(y[:SAMPLES])


def _call(name: str, method: str, fn, *args):
    """`fn(*args)`; an error inside a task's method is the task's, said as such."""
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - any error of the user's code, named
        first = str(err).splitlines()[0] if str(err) else ""
        raise Raised(f"task {name}: {method}() raised {type(err).__name__}: {first}") \
            from None


def _optimizer(task, name: str, model: nn.Module, cfg: TrialConfig) -> None:
    optimizer, scheduler = _call(name, "optimizer", optimizer_and_schedule, task,
                                 list(model.parameters()), OptimizerConfig.of(cfg, 1))
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"task {name}: optimizer(params, cfg) returned "
                         f"{type(optimizer).__name__}, not a torch.optim.Optimizer (or "
                         "(optimizer, scheduler))")
    covered = {id(p) for group in optimizer.param_groups for p in group["params"]}
    left = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in covered]
    if left:
        raise ValueError(f"task {name}: its optimizer leaves {len(left)} of the model's "
                         f"parameters untrained ({', '.join(left[:3])}"
                         f"{', ...' if len(left) > 3 else ''}): build it with the params it "
                         "is given")
    _call(name, "optimizer", optimizer.step)
    if scheduler is not None:
        _call(name, "optimizer", scheduler.step)


@torch.no_grad()
def _score(task, name: str, model: nn.Module, data: ArrayData, cfg: TrialConfig,
           meta) -> None:
    model.eval()
    x, y = _batch(data.x_val, data.y_val)
    if meta.task != "segment":  # a volume is scored whole; it needs no patch here
        x = center_crop(x, cfg.patch_size)
    outputs = _call(name, "model", model, x)
    value = _call(name, "score", task.score, outputs, (x, y))
    if getattr(task, "score_reduction", "mean") == "sum":
        if not hasattr(task, "finish_score"):
            raise ValueError(f"task {name}: score_reduction 'sum' needs finish_score(total): "
                             "the score from the summed counts")
        value = _call(name, "finish_score", task.finish_score, torch.as_tensor(value))
    number = _number(value)
    if number is None:
        raise ValueError(f"task {name}: score(outputs, batch) returned "
                         f"{_what(value)}, not a number: return the batch's score (a float or "
                         "a one-element tensor), or counts with score_reduction 'sum'")


def _number(value) -> float | None:
    if isinstance(value, torch.Tensor):
        value = value.item() if value.numel() == 1 else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _what(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return type(value).__name__
