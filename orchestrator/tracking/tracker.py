"""Experiment tracking: a small interface, a null implementation, and MLflow.

Everything is logged from the search driver (never from cluster workers, which then need no
access to the tracking store), in batches: one `log_batch` call per trial event. The MLflow
writes themselves live in `mlflow_writer`; holding and retrying them through an outage of the
tracking server in `outbox`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TextIO

from orchestrator.tracking.environment import environment_tags
from orchestrator.tracking.mlflow_writer import MlflowWriter
from orchestrator.tracking.outbox import Outbox

# MLflow's REST client retries a failed request for minutes by default; the outbox retries
# instead, so a server outage costs the Tune driver one short request per try.
_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


class Tracker:
    """What the search reports; every hook is a no-op here (the null tracker)."""

    location: str = "nowhere (tracking off)"
    parent_run_id: str | None = None

    def start_search(self, name: str, params: dict[str, Any],
                     artifacts: dict[str, str | bytes], parent_run_id: str | None = None) -> None:
        """parent_run_id: continue that parent run (a resumed search) rather than start one."""

    def start_trial(self, trial_id: str, params: dict[str, Any]) -> None:
        pass

    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int) -> None:
        pass

    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None = None) -> None:
        pass

    def discard_trial(self, trial_id: str) -> None:
        """A trial cut short by a driver's death (see `TrialStatus.DISCARDED`)."""

    def end_search(self, artifacts: dict[str, str | bytes], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float]) -> None:
        pass


NullTracker = Tracker


class MlflowTracker(Tracker):
    """One experiment per search name, a parent run per search, a child run per trial (found
    again by trial id, so a resumed search doubles nothing). No MLflow error reaches the search:
    what cannot be written now is held and retried (see `outbox`)."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None = None, *,
                 parent_run_id: str | None = None, fallback_dir: Path | None = None,
                 retry_window_s: float | None = None, out: TextIO | None = None,
                 outbox_file: Path | None = None):
        """
        parent_run_id: continue this parent run (a resumed search) instead of making one.
        fallback_dir: where the records go if the store is still unreachable when the search
            ends (default: the working directory).
        retry_window_s: how long the end of the search waits for an unreachable store
            (default: $ORCHESTRATOR_TRACKING_RETRY_S, else 60 s).
        out: where outage messages are printed (default: stderr).
        outbox_file: keep the queue of tracking steps on disk there (see `Outbox`); a tracker
            made on an existing file first writes what its dead predecessor had not.
        """
        import logging

        # mlflow sets its logger to INFO on import; its table-creation chatter is not progress.
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        if tracking_uri.startswith(("http://", "https://")):
            for key, value in _HTTP_ENV.items():
                os.environ.setdefault(key, value)  # a user's own setting wins

        self.tracking_uri = tracking_uri
        self.location = tracking_uri
        self.resume_parent_run_id = parent_run_id
        self.fallback_dir = fallback_dir
        self.retry_window_s = retry_window_s if retry_window_s is not None else \
            float(os.environ.get("ORCHESTRATOR_TRACKING_RETRY_S", 60))
        self.writer = MlflowWriter(tracking_uri, artifact_root)
        self.outbox = Outbox(self.writer, out=out, file=outbox_file)
        self._env = environment_tags()

    @property
    def parent_run_id(self) -> str | None:  # type: ignore[override]
        return self.writer.parent_run_id or self.resume_parent_run_id

    def start_search(self, name: str, params: dict[str, Any],
                     artifacts: dict[str, str | bytes], parent_run_id: str | None = None) -> None:
        self.resume_parent_run_id = parent_run_id or self.resume_parent_run_id
        self.outbox.continue_parent(self.resume_parent_run_id)
        self.outbox.submit("start_search", name=name, params=params, artifacts=artifacts,
                           tags=self._env, parent_run_id=self.resume_parent_run_id)

    def start_trial(self, trial_id: str, params: dict[str, Any]) -> None:
        # Copies: a held step must keep the values of its event, whatever the caller changes.
        self.outbox.submit("start_trial", trial_id=trial_id, params=dict(params), tags=self._env)

    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int) -> None:
        self.outbox.submit("log_epoch", trial_id=trial_id, metrics=dict(metrics), step=step,
                           timestamp_ms=_now_ms())

    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None = None) -> None:
        self.outbox.submit("end_trial", trial_id=trial_id, status=status, metrics=dict(metrics),
                           reason=reason, timestamp_ms=_now_ms())

    def discard_trial(self, trial_id: str) -> None:
        self.outbox.submit("discard_trial", trial_id=trial_id)

    def end_search(self, artifacts: dict[str, str | bytes], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float]) -> None:
        self.outbox.submit("end_search", artifacts=artifacts, trial_tags=trial_tags,
                           metrics=metrics, timestamp_ms=_now_ms())
        if not self.outbox.drain(self.retry_window_s):
            directory = self.fallback_dir or Path.cwd()
            message = self.outbox.fall_back(directory)
            self.location = f"sqlite:///{directory / 'mlflow-fallback.db'}"
            self.outbox.say(message)


def _now_ms() -> int:
    # The event's time, not the write's: a retried write then repeats the same point.
    return int(time.time() * 1000)
