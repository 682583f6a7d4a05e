"""The training loops: `fit` (every speed technique a switch) and `fit_legacy` (the "before"
loop every speedup is measured against), with their seam to the outside (`io`), their state and
metrics (`state`), the switches they share (`switches`), learning-rate schedules and tasks.

Layer: imports config, status, data, models and workloads; never the trial glue above it.
"""

from trainables.loop.fit import WARMUP_STEPS, TrainStep, fit
from trainables.loop.io import LoopIO
from trainables.loop.legacy import fit_legacy
from trainables.loop.state import LoopState, epoch_metrics

__all__ = ["WARMUP_STEPS", "LoopIO", "LoopState", "TrainStep", "epoch_metrics", "fit",
           "fit_legacy"]
