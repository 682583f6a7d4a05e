"""Twins: configurations that train the same run but for their precision and speed switches.

Twins learn alike: the same model, batch, lr and schedule, so their learning curves agree epoch
for epoch up to rounding (unet3d's bf16 and fp32 runs of one model and batch reached the
target an epoch apart, docs/benchmarks.md). What tells them apart is how fast an epoch runs,
which a trial measures within its first epochs. So once one twin is decided (it reached the
target at some epoch, or had not by the epoch it was cut at), another one's time to the target
is known after two of its epochs: that many epochs at its own measured pace. The stopper uses
this to cut a twin that cannot win long before its training time passes the fastest
(orchestrator/stopper.py): on unet3d an fp32 twin of a bf16 run that reached the target was
otherwise trained 9-11 s (a third of a baseline run) to learn what its second epoch showed.
"""

from __future__ import annotations

from typing import Any

from orchestrator.trial_book import config_key
from trainables.config import training_of

# Twins' curves differ by rounding: one may reach the target this many epochs before the other.
MARGIN = 1


def run_key(config: dict[str, Any]) -> str:
    """What a configuration trains, its precision and speed switches aside: equal for twins."""
    return config_key({k: v for k, v in training_of(config).items() if k != "precision"})


class TwinEpochs:
    """The earliest epoch each run (`run_key`) can be expected to reach the target at, as its
    decided twins say: one that reached it at epoch E says E - MARGIN; one that had not by epoch
    k (cut, or ended below it) says k + 1 - MARGIN. Several twins: the earliest (the benefit of
    the doubt goes to the trial)."""

    def __init__(self) -> None:
        self._earliest: dict[str, tuple[int, str]] = {}

    def learn(self, config: dict[str, Any], epoch: int, reached: bool) -> None:
        earliest = epoch - MARGIN if reached else epoch + 1 - MARGIN
        why = f"a twin reached the target at epoch {epoch}" if reached else \
            f"a twin had not reached the target by epoch {epoch}"
        key = run_key(config)
        if key not in self._earliest or earliest < self._earliest[key][0]:
            self._earliest[key] = (max(1, earliest), why)

    def earliest(self, config: dict[str, Any]) -> tuple[int, str] | None:
        """(epoch, why) for `config`'s run, or None when no twin of it is decided."""
        return self._earliest.get(run_key(config))
