"""Experiment tracking: a small interface, a null implementation, and MLflow.

Everything is logged from the search driver (never from cluster workers, which then need no
access to the tracking store), in batches: one `log_batch` call per trial event.
"""

from __future__ import annotations

import json
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

# Trial status -> MLflow run status.
RUN_STATUS = {
    "completed": "FINISHED",
    "early_stopped": "FINISHED",
    "pruned": "KILLED",
    "stopped": "KILLED",
    "diverged": "FAILED",
    "infeasible": "FAILED",
    "failed": "FAILED",
}


class Tracker:
    """What the search reports; every hook is a no-op here (the null tracker)."""

    location: str = "nowhere (tracking off)"
    parent_run_id: str | None = None

    def start_search(self, name: str, params: dict[str, Any], artifacts: dict[str, str]) -> None:
        pass

    def start_trial(self, trial_id: str, params: dict[str, Any]) -> None:
        pass

    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int) -> None:
        pass

    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None = None) -> None:
        pass

    def end_search(self, artifacts: dict[str, str], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float]) -> None:
        pass


NullTracker = Tracker


def environment_tags() -> dict[str, str]:
    import optuna
    import ray
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \
        f"cpu ({platform.processor() or platform.machine()})"
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return {"env.torch": torch.__version__, "env.ray": ray.__version__,
            "env.optuna": optuna.__version__, "env.python": platform.python_version(),
            "env.device": device, "env.git_sha": sha or "unknown"}


class MlflowTracker(Tracker):
    """One experiment per search name, a parent run per search, a child run per trial."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None = None):
        import logging

        from mlflow.tracking import MlflowClient

        # mlflow sets its logger to INFO on import; its table-creation chatter is not progress.
        logging.getLogger("mlflow").setLevel(logging.WARNING)

        self.tracking_uri = tracking_uri
        self.location = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.artifact_root = artifact_root
        self.experiment_id: str | None = None
        self.runs: dict[str, str] = {}  # trial id -> MLflow run id
        self._env = environment_tags()

    # -- helpers ------------------------------------------------------------------------------------
    def _experiment(self, name: str) -> str:
        existing = self.client.get_experiment_by_name(name)
        if existing is not None:
            return existing.experiment_id
        location = None
        if self.artifact_root is not None:
            location = (self.artifact_root / name).resolve().as_uri()
        return self.client.create_experiment(name, artifact_location=location)

    def _log(self, run_id: str, metrics: dict[str, float] | None = None, step: int = 0,
             params: dict[str, Any] | None = None, tags: dict[str, str] | None = None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, step) for k, v in (metrics or {}).items()],
            params=[Param(k, _param(v)) for k, v in (params or {}).items()],
            tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )

    def _artifacts(self, run_id: str, artifacts: dict[str, str]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in artifacts.items():
                path = Path(tmp) / name
                path.write_text(content)
                self.client.log_artifact(run_id, str(path))

    # -- hooks --------------------------------------------------------------------------------------
    def start_search(self, name: str, params: dict[str, Any], artifacts: dict[str, str]) -> None:
        self.experiment_id = self._experiment(name)
        run = self.client.create_run(self.experiment_id, run_name=f"search-{name}",
                                     tags={"orchestrator.role": "search", **self._env})
        self.parent_run_id = run.info.run_id
        self._log(self.parent_run_id, params=params)
        self._artifacts(self.parent_run_id, artifacts)

    def start_trial(self, trial_id: str, params: dict[str, Any]) -> None:
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"trial-{trial_id}",
            tags={"mlflow.parentRunId": self.parent_run_id, "orchestrator.role": "trial",
                  "orchestrator.trial_id": trial_id, "status": "running", **self._env},
        )
        self.runs[trial_id] = run.info.run_id
        self._log(run.info.run_id, params=params)

    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int) -> None:
        self._log(self.runs[trial_id], metrics=metrics, step=step)

    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None = None) -> None:
        run_id = self.runs[trial_id]
        tags = {"status": status}
        # Resumed from a checkpoint after a worker died (FailureConfig): worth a filter in the UI.
        restarts = int(metrics.get("restarts", 0))
        tags |= {"restarted": str(restarts > 0).lower(), "restarts": str(restarts)}
        if reason:
            tags["failure_reason"] = reason[:4000]
        final = {f"final_{k}": v for k, v in metrics.items()}
        self._log(run_id, metrics=final, tags=tags)
        self.client.set_terminated(run_id, RUN_STATUS.get(status, "FAILED"))

    def end_search(self, artifacts: dict[str, str], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float]) -> None:
        for trial_id, tags in trial_tags.items():
            if trial_id in self.runs:
                self._log(self.runs[trial_id], tags=tags)
        self._artifacts(self.parent_run_id, artifacts)
        self._log(self.parent_run_id, metrics=metrics)
        self.client.set_terminated(self.parent_run_id, "FINISHED")


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:6000]  # MLflow's param value limit
