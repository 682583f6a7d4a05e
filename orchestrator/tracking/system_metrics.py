"""MLflow system metrics (CPU, memory, disk, network; GPU utilisation and memory where there is an
NVIDIA GPU) on each trial's run, as `system/...` metrics that the MLflow UI charts.

Where the sampling happens: in the search driver, one MLflow `SystemMetricsMonitor` thread per
running trial, sampling the driver's machine. Child runs are written by the driver (cluster
workers need no access to the tracking store), so this is the machine that runs local trials:
exactly the trial's hardware for a local search. On a multi-node cluster it samples the head
node, not the GPU nodes (see docs/records.md).

Trials last seconds to minutes, so the interval is short (1 s, against MLflow's default 10 s);
MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL overrides it, as in MLflow.
"""

from __future__ import annotations

import logging


class SystemMetrics:
    def __init__(self, tracking_uri: str, interval_s: float = 1.0):
        self.tracking_uri = tracking_uri
        self.interval_s = interval_s
        self.monitors: dict[str, object] = {}  # trial id -> its running monitor
        # A monitor that finds its run gone or the store down stops itself, with a warning per
        # trial; the outbox already says the store is down, once.
        logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)

    def start(self, trial_id: str, run_id: str) -> None:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        if trial_id in self.monitors:
            return
        # resume_logging: a resumed trial's run continues its steps rather than overwrite them.
        monitor = SystemMetricsMonitor(run_id, sampling_interval=self.interval_s,
                                       samples_before_logging=1, resume_logging=True,
                                       tracking_uri=self.tracking_uri)
        monitor.start()
        self.monitors[trial_id] = monitor

    def stop(self, trial_id: str) -> None:
        monitor = self.monitors.pop(trial_id, None)
        if monitor is not None:
            monitor.finish()  # joins the thread and writes what it still holds

    def stop_all(self) -> None:
        for trial_id in list(self.monitors):
            self.stop(trial_id)
