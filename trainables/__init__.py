"""Trainables: what one trial trains, on what, and how.

    config.py     TrialConfig: every knob the search may turn
    status.py     TrialStatus: how a trial can end, and the groups of statuses
    data/         arrays and their loaders, crops, the Ray Data pipeline
    models/       model blocks and the built-in models
    workloads.py  the registry: workload name -> (default data, model builder)
    loop/         the optimized loop, the legacy loop, their state and switches
    trial/        the Ray Tune trainable and the worker adapter

Layers, bottom up: config, status -> data -> models -> workloads -> loop -> trial. A module
imports only from its own layer or below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainables.config import TrialConfig
from trainables.data.arrays import ArrayData, DataError, DataMeta
from trainables.status import TrialStatus

if TYPE_CHECKING:
    from trainables.models import ModelBuilder

__all__ = ["ArrayData", "DataError", "DataMeta", "ModelBuilder", "TrialConfig", "TrialStatus"]


def __getattr__(name: str) -> Any:
    # ModelBuilder names an nn.Module type: importing torch is left to those who need it.
    if name == "ModelBuilder":
        from trainables.models import ModelBuilder

        return ModelBuilder
    raise AttributeError(f"module 'trainables' has no attribute {name!r}")
