"""A run recorded in MLflow, read back as a learning curve: what a baseline taken from history
needs (orchestrator/history_baseline.py). MLflow is reached only through this package.

A run holds a validation score per epoch (`val_score`, its step the epoch: what this tool logs,
and what your own training logs with `mlflow.log_metric("val_score", score, step=epoch)`), its
training time per epoch where it logged one (`train_time_s`; else the score's timestamps, from
the run's start, stand for it), and its settings as params. A run this tool trained (its
search's run names its task) also holds its gradient noise scale where it measured it
(`noise_scale`) and its training loss per epoch (`train_loss`): what the predictions and the
validation gate read of a baseline, so a search from the run predicts as one from its
`baseline.json` does; and the step it timed before training (`start_step_s`), what the
machine's speed was that day.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SCORE, TIME = "val_score", "train_time_s"
NOISE, LOSS = "noise_scale", "train_loss"
# The step this tool's trial timed in its own process before its clock started, a few steps of
# its own settings (trainables/loop/profile.START_STEP): what the machine's speed then was.
STEP = "start_step_s"
# The same settings' step timed as a later search times a baseline's (orchestrator/step_timing.py,
# at its baseline stage's start, before the run trained): what a later search's timing is held
# against. The trial's own start step is no such twin: on an idle 2-core machine the classifier's
# baseline timed 0.0142 s a step in its trial's process and 0.0107-0.0128 s in later searches'
# timings, and was scaled 0.76-0.79x for a machine that had not moved (docs/benchmarks.md).
CLOCK_STEP = "clock_step_s"
PARENT, MACHINE_KIND, TASK = "mlflow.parentRunId", "machine_kind", "task"


class RunNotFound(ValueError):
    pass


@dataclass(frozen=True)
class RecordedRun:
    run_id: str
    params: dict[str, str]
    curve: list[list[float]]
    """[epoch, val_score, seconds] of every epoch that logged a score."""
    seconds_from: str
    """Where the seconds come from: the run's `train_time_s`, or its wall clock."""
    machine_kind: str | None = None
    """The machine kind its search ran on, where this tool recorded it (the parent run's
    `machine_kind` param); None for a run of your own."""
    task: str | None = None
    """What its search trained (the parent run's `task` param), where this tool recorded it."""
    noise: list[list[float]] = field(default_factory=list)
    """[epoch, gradient noise scale] where it was measured; empty for a run of your own."""
    losses: list[list[float]] = field(default_factory=list)
    """[epoch, training loss] of every epoch that logged one; empty for a run of your own."""
    start_step_s: float | None = None
    """Seconds a step of its settings took, timed before its training (`STEP`); None for a run
    of your own."""
    clock_step_s: float | None = None
    """Seconds a step of its settings took, timed as a later search times it (`CLOCK_STEP`);
    None for a run of your own, or one recorded before it was."""


def read_run(tracking_uri: str, run_id: str) -> RecordedRun:
    """The run `run_id` of the store at `tracking_uri`; RunNotFound where it does not exist,
    ValueError where it holds no score per epoch."""
    import logging

    import mlflow.exceptions
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # no table-creation chatter
    client = MlflowClient(tracking_uri)
    try:
        run = client.get_run(run_id)
    except mlflow.exceptions.MlflowException:
        raise RunNotFound(f"baseline runs:/{run_id}: no such run in the MLflow store "
                          f"{tracking_uri} (--tracking-uri names the store)") from None
    scores = {int(m.step): m for m in client.get_metric_history(run_id, SCORE)}
    if not scores:
        raise ValueError(f"baseline runs:/{run_id}: the run has no '{SCORE}' metric history "
                         f"(a validation score per epoch, step = epoch): log it, or give the "
                         "baseline as a CSV of epoch, seconds, score")
    times = {int(m.step): m.value for m in client.get_metric_history(run_id, TIME)}
    start = run.info.start_time
    curve = [[epoch, float(m.value), float(times[epoch]) if epoch in times else
              (m.timestamp - start) / 1000.0] for epoch, m in sorted(scores.items())]
    search: dict[str, str] = {}
    if run.data.tags.get(PARENT):
        try:
            search = client.get_run(run.data.tags[PARENT]).data.params
        except mlflow.exceptions.MlflowException:
            pass  # its search's run is gone: the run alone says nothing of its machine
    # Only this tool's run: your own `train_loss` may be another loss, or a sum.
    ours = bool(search.get(TASK))
    return RecordedRun(run_id, dict(run.data.params), curve,
                       TIME if len(times) >= len(scores) else "the run's wall clock",
                       search.get(MACHINE_KIND), search.get(TASK),
                       _series(client, run_id, NOISE) if ours else [],
                       _series(client, run_id, LOSS) if ours else [],
                       _positive(run.data.metrics.get(STEP)) if ours else None,
                       _positive(run.data.metrics.get(CLOCK_STEP)) if ours else None)


def _positive(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and \
        value > 0 else None


def _series(client, run_id: str, key: str) -> list[list[float]]:
    """[epoch, value] of a metric's finite values, by epoch (step)."""
    values = {int(m.step): float(m.value) for m in client.get_metric_history(run_id, key)}
    return [[epoch, v] for epoch, v in sorted(values.items()) if math.isfinite(v)]
