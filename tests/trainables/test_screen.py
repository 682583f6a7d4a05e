"""The screen's timing of candidates (`trainables.trial.screen`) without Ray.

Run: python -m pytest -q tests/trainables/test_screen.py
"""

from __future__ import annotations

import numpy as np

from trainables.data.arrays import DataMeta
from trainables.trial import screen as screen_module
from trainables.trial.screen import ScreenPlan, screen
from trainables.status import TrialStatus

import torch


class ArrayShard:
    """What the screen reads from a Ray Data shard: whole blocks as numpy."""

    def __init__(self, n: int):
        rng = np.random.default_rng(0)
        self.x = rng.normal(size=(n, 1, 12, 12)).astype(np.float32)
        self.y = rng.integers(0, 3, n)

    def iter_batches(self, **_):
        yield {"x": self.x, "y": self.y}


def test_candidates_are_timed_without_cudnns_algorithm_search_and_keep_their_own_config(
        monkeypatch):
    """cuDNN's per-shape algorithm search cost 1-4 s a candidate on an H100, more than the steps
    the screen times (docs/benchmarks.md): the timer gets cudnn_benchmark off, the result keeps
    the config as the search gave it; a batch larger than the data is infeasible, not timed."""
    timed = []
    real = screen_module.StepTimer.__call__

    def record(self, cfg):
        timed.append(cfg)
        return real(self, cfg)

    monkeypatch.setattr(screen_module.StepTimer, "__call__", record)
    base = {"workload": "classifier", "epochs": 1, "width": 0.25, "patch_size": 8,
            "cudnn_benchmark": True}
    plan = ScreenPlan(candidates=[{**base, "batch_size": 8}, {**base, "batch_size": 64}],
                      meta=DataMeta(1, 3), n_train=32, threads=1)
    results = screen(plan, ArrayShard(32), torch.device("cpu"))
    assert [r["status"] for r in results] == [str(TrialStatus.COMPLETED),
                                              str(TrialStatus.INFEASIBLE)]
    # The first candidate twice: an untimed pass pays the process's first-use costs, which are
    # outside every trial's clock (so outside its one_off_s), then the timing.
    assert [c.cudnn_benchmark for c in timed] == [False, False] and timed[0] == timed[1]
    assert results[0]["config"]["cudnn_benchmark"] is True
    assert results[0]["samples_per_s"] > 0 and results[0]["steps_per_epoch"] == 4
