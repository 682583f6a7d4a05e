"""MLflow system metrics of each trial's run, from the trial's own node.

The samples are taken where the trial trains (trainables/trial/sampling.py: CPU, memory, and
GPU utilisation, memory and power where the process has GPUs) and arrive with the trial's
reports; the driver writes them here, as the `system/...` metrics MLflow's own monitor writes,
each point at the time it was sampled. Workers need no access to the tracking store.

Why not MLflow's `SystemMetricsMonitor` in the driver, as before: it samples the machine it runs
on, which on a cluster is the head (no GPU, no training), and it cannot be told apart from the
trial's node by the metric names. On a local search the trial's node is the driver's machine,
and the trial's samples say the same, so the driver samples nothing itself: one source, one path.

Steps: each metric's points are numbered 0, 1, 2, ... per trial in the order they arrive (as
MLflow's monitor numbers its logging steps), so the UI can chart them by step or by time.
"""

from __future__ import annotations

from typing import Any

PREFIX = "system/"


class SystemSeries:
    """Numbers the samples of every trial into MLflow points (key, value, timestamp_ms, step)."""

    def __init__(self) -> None:
        self._next: dict[str, dict[str, int]] = {}  # trial id -> metric -> its next step

    def points(self, trial_id: str, samples: list) -> list[list]:
        """[[timestamp_ms, {name: value}], ...] -> [[key, value, timestamp_ms, step], ...]."""
        steps = self._next.setdefault(trial_id, {})
        out: list[list[Any]] = []
        for timestamp_ms, values in samples:
            for name, value in values.items():
                key = PREFIX + name
                step = steps.get(key, 0)
                steps[key] = step + 1
                out.append([key, float(value), int(timestamp_ms), step])
        return out

    def forget(self, trial_id: str) -> None:
        self._next.pop(trial_id, None)
