"""The code that talks to MLflow: one experiment per search, a parent run per search, a child run
per trial.

Every operation is safe to repeat (the outbox in `outbox` retries whatever failed, and may
replay a whole search into another store): runs are found again by key before one is created,
metrics carry the timestamp of the event rather than of the write (MLflow keeps one copy of an
identical point), params are the same values, tags and artifacts are overwritten.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from trainables.status import mlflow_run_status

TRIAL_ID_TAG = "orchestrator.trial_id"
PARENT_TAG = "mlflow.parentRunId"


class MlflowWriter:
    def __init__(self, tracking_uri: str, artifact_root: Path | None = None):
        from mlflow.tracking import MlflowClient

        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        # A server stores artifacts where it was told to (--artifacts-destination); a local
        # path chosen here would be invisible to a remote server's UI.
        remote = tracking_uri.startswith(("http://", "https://"))
        self.artifact_root = None if remote else artifact_root
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.runs: dict[str, str] = {}  # trial id -> MLflow run id, filled as runs are made

    # -- helpers ----------------------------------------------------------------------------
    def _experiment(self, name: str) -> str:
        existing = self.client.get_experiment_by_name(name)
        if existing is not None:
            return existing.experiment_id
        location = None
        if self.artifact_root is not None:
            location = (self.artifact_root / name).resolve().as_uri()
        return self.client.create_experiment(name, artifact_location=location)

    def _log(self, run_id: str, metrics: dict[str, float] | None = None, step: int = 0,
             timestamp_ms: int = 0, params: dict[str, Any] | None = None,
             tags: dict[str, str] | None = None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), timestamp_ms, step) for k, v in (metrics or {}).items()],
            params=[Param(k, _param(v)) for k, v in (params or {}).items()],
            tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )

    def _artifacts(self, run_id: str, artifacts: dict[str, str | bytes]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in artifacts.items():
                path = Path(tmp) / name
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content)
                self.client.log_artifact(run_id, str(path))

    def _existing_parent(self, run_id: str | None) -> str | None:
        from mlflow.exceptions import MlflowException

        if not run_id:
            return None
        try:
            run = self.client.get_run(run_id)
        except MlflowException as err:
            if err.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None  # e.g. replaying into a fresh store: make a new parent
            raise
        if run.info.lifecycle_stage != "active" or run.info.experiment_id != self.experiment_id:
            return None
        return run_id

    def _run(self, trial_id: str) -> str | None:
        """The trial's run: made by this writer, or by an earlier driver of a resumed search."""
        if trial_id not in self.runs:
            run_id = self._existing_trial_run(trial_id)
            if run_id is None:
                return None
            self.runs[trial_id] = run_id
        return self.runs[trial_id]

    def _existing_trial_run(self, trial_id: str) -> str | None:
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TRIAL_ID_TAG}` = '{trial_id}' "
                          f"and tags.`{PARENT_TAG}` = '{self.parent_run_id}'",
            max_results=1,
        )
        return found[0].info.run_id if found else None

    # -- operations (each one a step of the outbox; see outbox) --------------------
    def start_search(self, name: str, params: dict[str, Any], artifacts: dict[str, str | bytes],
                     tags: dict[str, str], parent_run_id: str | None = None) -> None:
        self.experiment_id = self._experiment(name)
        # A second start_search in one writer (a resumed search writing its dead driver's held
        # steps first) continues the parent it already has.
        run_id = self._existing_parent(parent_run_id or self.parent_run_id)
        if run_id is None:
            origin = {"orchestrator.origin_run_id": parent_run_id} if parent_run_id else {}
            run = self.client.create_run(self.experiment_id, run_name=f"search-{name}",
                                         tags={"orchestrator.role": "search", **tags, **origin})
            run_id = run.info.run_id
        else:  # a resumed search continues its parent run
            self.client.update_run(run_id, status="RUNNING")
            # MLflow refuses to change a param; the first value logged stays.
            logged = self.client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in logged}
        self.parent_run_id = run_id
        self._log(run_id, params=params, tags=tags)
        self._artifacts(run_id, artifacts)

    def start_trial(self, trial_id: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        tags = {PARENT_TAG: self.parent_run_id, "orchestrator.role": "trial",
                TRIAL_ID_TAG: trial_id, "status": "running", **tags}
        run_id = self._existing_trial_run(trial_id)
        if run_id is None:
            run = self.client.create_run(self.experiment_id, run_name=f"trial-{trial_id}",
                                         tags=tags)
            run_id = run.info.run_id
        else:  # the same trial again (a resumed search, or a retried write): one run per trial
            self.client.update_run(run_id, status="RUNNING")
            self._log(run_id, tags=tags)
            logged = self.client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in logged}
        self.runs[trial_id] = run_id
        self._log(run_id, params=params)

    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int,
                  timestamp_ms: int) -> None:
        self._log(self._run(trial_id), metrics=metrics, step=step, timestamp_ms=timestamp_ms)

    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None, timestamp_ms: int) -> None:
        run_id = self._run(trial_id)
        tags = {"status": status}
        # Resumed from a checkpoint after a worker died (FailureConfig): worth a filter in the UI.
        restarts = int(metrics.get("restarts", 0))
        tags |= {"restarted": str(restarts > 0).lower(), "restarts": str(restarts)}
        if reason:
            tags["failure_reason"] = reason[:4000]
        final = {f"final_{k}": v for k, v in metrics.items()}
        self._log(run_id, metrics=final, tags=tags, timestamp_ms=timestamp_ms)
        self.client.set_terminated(run_id, mlflow_run_status(status))

    def discard_trial(self, trial_id: str) -> None:
        """Delete the partial run of a trial cut short by a driver's death (a resume runs a new
        trial in its place). Deleted, not dropped: `mlflow gc` or the UI can still restore it."""
        run_id = self._run(trial_id)
        if run_id is None:
            return  # the dead driver never reached MLflow for it
        self._log(run_id, tags={"status": "discarded"})
        self.client.set_terminated(run_id, mlflow_run_status("discarded"))
        self.client.delete_run(run_id)
        self.runs.pop(trial_id, None)

    def end_search(self, artifacts: dict[str, str | bytes], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float], timestamp_ms: int) -> None:
        # Every trial of the search, also those an earlier driver of a resumed search ran.
        for trial_id, tags in trial_tags.items():
            run_id = self._run(trial_id)
            if run_id is not None:
                self._log(run_id, tags=tags)
        self._artifacts(self.parent_run_id, artifacts)
        self._log(self.parent_run_id, metrics=metrics, timestamp_ms=timestamp_ms)
        self.client.set_terminated(self.parent_run_id, "FINISHED")


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:6000]  # MLflow's param value limit
