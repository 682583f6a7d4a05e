"""The code that talks to MLflow: one experiment per search, a parent run per search, a child run
per trial.

Every operation is safe to repeat (the outbox in `outbox` retries whatever failed, and may
replay a whole search into another store): runs are found again by key before one is created,
metrics carry the timestamp of the event rather than of the write (MLflow keeps one copy of an
identical point), params are the same values, tags and artifacts are overwritten.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from pathlib import Path
from typing import Any

from orchestrator.tracking.steps import (DatasetRecord, DiscardTrial, EndSearch, EndTrial,
                                         InterruptSearch, LogEpoch, LogSystem, StartSearch,
                                         StartTrial, Step)
from trainables.status import TrialStatus, mlflow_run_status

TRIAL_ID_TAG = "orchestrator.trial_id"
INTERRUPTED_TAG = "interrupted"  # on the parent run while a signal has it stopped
PARENT_TAG = "mlflow.parentRunId"
# MLflow 3 opens an experiment without this tag in its GenAI view (traces, tokens); this one
# opens it on its training runs.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def open_store_early(tracking_uri: str) -> threading.Thread | None:
    """Open a SQLite store in a background thread, to be joined before the tracker is made; None
    for other stores (nothing slow to open). A new SQLite store creates its tables first (2.4-3.3
    s here), and a local Ray's start leaves a core idle for that long: opened during it, the
    tracker then takes the open store from MLflow's cache of stores by URI. An error is left to
    the tracker, which meets it again and deals with it as it always does."""
    if not tracking_uri.startswith("sqlite:"):
        return None

    def open_store() -> None:
        try:
            from mlflow.tracking import MlflowClient

            logging.getLogger("mlflow").setLevel(logging.WARNING)  # no table-creation chatter
            MlflowClient(tracking_uri=tracking_uri)  # builds the store, which MLflow keeps
        except Exception:  # noqa: BLE001 - the tracker reports it, in the driver's thread
            pass

    # Not a daemon: a table migration cut off by the interpreter's exit is left to roll back.
    thread = threading.Thread(target=open_store, name="open-mlflow-store")
    thread.start()
    return thread


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
        self.dataset: DatasetRecord | None = None  # the search's data, logged on every run

    # -- helpers ----------------------------------------------------------------------------
    def _experiment(self, name: str) -> str:
        existing = self.client.get_experiment_by_name(name)
        if existing is not None:
            if "mlflow.experimentKind" not in existing.tags:  # made by an older version
                for key, value in EXPERIMENT_KIND.items():
                    self.client.set_experiment_tag(existing.experiment_id, key, value)
            return existing.experiment_id
        location = None
        if self.artifact_root is not None:
            location = (self.artifact_root / name).resolve().as_uri()
        return self.client.create_experiment(name, artifact_location=location,
                                             tags=EXPERIMENT_KIND)

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

    def _log_dataset(self, run_id: str, dataset: DatasetRecord | None) -> None:
        from mlflow.entities import Dataset, DatasetInput, InputTag

        if dataset is None:
            return
        entity = Dataset(name=dataset.name, digest=dataset.digest,
                         source_type=dataset.source_type, source=dataset.source,
                         schema=dataset.schema or None, profile=dataset.profile)
        # MLflow keeps one copy of a dataset input per (run, dataset): safe to repeat.
        self.client.log_inputs(run_id, [DatasetInput(entity, [InputTag("mlflow.data.context",
                                                                       "training")])])

    # -- operations: one per step (see `steps`); each is safe to repeat ----------------------
    def write(self, step: Step) -> None:
        match step:
            case StartSearch():
                self._start_search(step)
            case StartTrial():
                self._start_trial(step)
            case LogEpoch():
                self._log(self._run(step.trial_id), metrics=step.metrics, step=step.step,
                          timestamp_ms=step.timestamp_ms)
            case LogSystem():
                self._log_system(step)
            case EndTrial():
                self._end_trial(step)
            case DiscardTrial():
                self._discard_trial(step)
            case EndSearch():
                self._end_search(step)
            case InterruptSearch():
                self._log(self.parent_run_id, tags={INTERRUPTED_TAG: "true"})
                self.client.set_terminated(self.parent_run_id, "KILLED")
            case _:
                raise TypeError(f"not a tracking step: {step!r}")

    def _start_search(self, step: StartSearch) -> None:
        self.experiment_id = self._experiment(step.name)
        params, tags = step.params, step.tags
        # A second start_search in one writer (a resumed search writing its dead driver's held
        # steps first) continues the parent it already has.
        run_id = self._existing_parent(step.parent_run_id or self.parent_run_id)
        if run_id is None:
            origin = {"orchestrator.origin_run_id": step.parent_run_id} \
                if step.parent_run_id else {}
            run = self.client.create_run(self.experiment_id, run_name=f"search-{step.name}",
                                         tags={"orchestrator.role": "search", **tags, **origin})
            run_id = run.info.run_id
        else:  # a resumed search continues its parent run
            self.client.update_run(run_id, status="RUNNING")
            if INTERRUPTED_TAG in self.client.get_run(run_id).data.tags:
                self.client.delete_tag(run_id, INTERRUPTED_TAG)  # it runs again
            # MLflow refuses to change a param; the first value logged stays.
            logged = self.client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in logged}
        self.parent_run_id = run_id
        self.dataset = step.dataset
        self._log(run_id, params=params, tags=tags)
        self._log_dataset(run_id, step.dataset)
        self._artifacts(run_id, step.artifacts)

    def _start_trial(self, step: StartTrial) -> None:
        tags = {PARENT_TAG: self.parent_run_id, "orchestrator.role": "trial",
                TRIAL_ID_TAG: step.trial_id, "status": TrialStatus.RUNNING, **step.tags}
        # Every config field is a param (the config is flat), the searched knobs among them:
        # the run alone says how to train that model again.
        params = {**step.params, **(step.config or {})}
        run_id = self._existing_trial_run(step.trial_id)
        if run_id is None:
            run = self.client.create_run(self.experiment_id, run_name=f"trial-{step.trial_id}",
                                         tags=tags)
            run_id = run.info.run_id
        else:  # the same trial again (a resumed search, or a retried write): one run per trial
            self.client.update_run(run_id, status="RUNNING")
            self._log(run_id, tags=tags)
            logged = self.client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in logged}
        self.runs[step.trial_id] = run_id
        self._log(run_id, params=params)
        self._log_dataset(run_id, self.dataset)
        if step.config is not None:
            self._artifacts(run_id, {"config.json": json.dumps(step.config, indent=2,
                                                               default=str)})

    def _end_trial(self, step: EndTrial) -> None:
        run_id = self._run(step.trial_id)
        tags = {**step.tags, "status": step.status}
        # Resumed from a checkpoint after a worker died (FailureConfig): worth a filter in the UI.
        restarts = int(step.metrics.get("restarts", 0))
        tags |= {"restarted": str(restarts > 0).lower(), "restarts": str(restarts)}
        if step.reason:
            tags["failure_reason"] = step.reason[:4000]
        final = {f"final_{k}": v for k, v in step.metrics.items()}
        self._log(run_id, metrics=final, tags=tags, timestamp_ms=step.timestamp_ms)
        self.client.set_terminated(run_id, mlflow_run_status(step.status))

    def _log_system(self, step: LogSystem) -> None:
        """Points with their own timestamps and steps, in batches MLflow takes (1000 at most)."""
        from mlflow.entities import Metric, RunTag

        run_id = self._run(step.trial_id)
        if step.tags:
            self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in step.tags.items()])
        for start in range(0, len(step.points), 1000):
            self.client.log_batch(run_id, metrics=[
                Metric(key, float(value), int(timestamp_ms), int(index))
                for key, value, timestamp_ms, index in step.points[start:start + 1000]])

    def _discard_trial(self, step: DiscardTrial) -> None:
        """Delete the partial run of a trial cut short by a driver's death (a resume runs a new
        trial in its place). Deleted, not dropped: the UI can still restore it."""
        run_id = self._run(step.trial_id)
        if run_id is None:
            return  # the dead driver never reached MLflow for it
        self._log(run_id, tags={"status": TrialStatus.DISCARDED})
        self.client.set_terminated(run_id, mlflow_run_status(TrialStatus.DISCARDED))
        self.client.delete_run(run_id)
        self.runs.pop(step.trial_id, None)

    def _end_search(self, step: EndSearch) -> None:
        # Every trial of the search, also those an earlier driver of a resumed search ran.
        for trial_id, tags in step.trial_tags.items():
            run_id = self._run(trial_id)
            if run_id is not None:
                self._log(run_id, tags=tags)
        self._artifacts(self.parent_run_id, step.artifacts)
        self._log(self.parent_run_id, metrics=step.metrics, timestamp_ms=step.timestamp_ms)
        self.client.set_terminated(self.parent_run_id, "FINISHED")


def _param(value: Any) -> str:
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()  # numpy scalars (what Optuna samples): 16, not "16"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:6000]  # MLflow's param value limit
