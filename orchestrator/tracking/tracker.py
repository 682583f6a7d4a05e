"""Experiment tracking: a small interface, a null implementation, and MLflow.

Everything is logged from the search driver (never from cluster workers, which then need no
access to the tracking store), in batches: one `log_batch` call per trial event. The MLflow
writes themselves live in `mlflow_writer`; holding and retrying them through an outage of the
tracking server in `outbox`.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, TextIO

from orchestrator.tracking.environment import environment_tags, search_wide
from orchestrator.tracking.mlflow_writer import MlflowWriter
from orchestrator.tracking.outbox import Outbox
from orchestrator.tracking.steps import (DatasetRecord, DiscardTrial, EndSearch, EndTrial,
                                         InterruptSearch, LogEpoch, LogSystem, StartSearch,
                                         StartTrial)
from orchestrator.tracking.system_metrics import SystemSeries

# MLflow's REST client retries a failed request for minutes by default; the outbox retries
# instead, so a server outage costs the Tune driver one short request per try.
_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


class Tracker(ABC):
    """What the search reports, one method per tracking verb (see `steps`)."""

    location: str = "nowhere (tracking off)"
    parent_run_id: str | None = None

    @abstractmethod
    def start_search(self, name: str, params: dict[str, Any],
                     artifacts: dict[str, str | bytes], parent_run_id: str | None = None,
                     dataset: DatasetRecord | None = None) -> None:
        """parent_run_id: continue that parent run (a resumed search) rather than start one.
        dataset: the search's data, recorded on the parent and on every trial's run."""

    @abstractmethod
    def start_trial(self, trial_id: str, params: dict[str, Any],
                    config: dict[str, Any] | None = None, role: str = "trial",
                    tags: dict[str, str] | None = None) -> None:
        """params: the searched knobs; config: the trial's whole resolved config; role: why it
        ran (`orchestrator.records.Role`); tags: more tags of its run (`baseline`)."""

    @abstractmethod
    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int) -> None: ...

    @abstractmethod
    def log_system(self, trial_id: str, samples: list, tags: dict[str, str]) -> None:
        """What a trial's training processes sampled of their nodes since their last report,
        [[timestamp_ms, {name: value}], ...], and the tags they report of them (node, device):
        see `system_metrics`."""

    @abstractmethod
    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None = None, tags: dict[str, str] | None = None) -> None:
        """tags: extra tags of the trial's run (the speed profile's picks, `pick.<switch>`)."""

    @abstractmethod
    def discard_trial(self, trial_id: str) -> None:
        """A trial cut short by a driver's death (see `TrialStatus.DISCARDED`)."""

    @abstractmethod
    def end_search(self, artifacts: dict[str, str | bytes], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float]) -> None: ...

    @abstractmethod
    def interrupt_search(self) -> None:
        """A signal stopped the search: its parent run ends KILLED, tagged `interrupted`, until
        `orchestrator resume` continues it."""


class NullTracker(Tracker):
    """Tracking off: every verb does nothing."""

    def start_search(self, name, params, artifacts, parent_run_id=None, dataset=None) -> None:
        pass

    def start_trial(self, trial_id, params, config=None, role="trial", tags=None) -> None:
        pass

    def log_epoch(self, trial_id, metrics, step) -> None:
        pass

    def log_system(self, trial_id, samples, tags) -> None:
        pass

    def end_trial(self, trial_id, status, metrics, reason=None, tags=None) -> None:
        pass

    def discard_trial(self, trial_id) -> None:
        pass

    def end_search(self, artifacts, trial_tags, metrics) -> None:
        pass

    def interrupt_search(self) -> None:
        pass


class MlflowTracker(Tracker):
    """One experiment per search name, a parent run per search, a child run per trial (found
    again by trial id, so a resumed search doubles nothing). No MLflow error reaches the search:
    what cannot be written now is held and retried (see `outbox`)."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None = None, *,
                 parent_run_id: str | None = None, fallback_dir: Path | None = None,
                 retry_window_s: float | None = None, out: TextIO | None = None,
                 system_metrics: bool = True, outbox_file: Path | None = None):
        """
        parent_run_id: continue this parent run (a resumed search) instead of making one.
        fallback_dir: where the records go if the store is still unreachable when the search
            ends (default: the working directory).
        retry_window_s: how long the end of the search waits for an unreachable store
            (default: $ORCHESTRATOR_TRACKING_RETRY_S, else 60 s).
        out: where outage messages are printed (default: stderr).
        system_metrics: write the system metrics (CPU, memory, GPU) each trial samples of its
            own node to its run; False drops them.
        outbox_file: keep the queue of tracking steps on disk there (see `Outbox`).
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
        self.system_metrics = SystemSeries() if system_metrics else None

    @property
    def parent_run_id(self) -> str | None:  # type: ignore[override]
        return self.writer.parent_run_id or self.resume_parent_run_id

    def start_search(self, name: str, params: dict[str, Any],
                     artifacts: dict[str, str | bytes], parent_run_id: str | None = None,
                     dataset: DatasetRecord | None = None) -> None:
        self.resume_parent_run_id = parent_run_id or self.resume_parent_run_id
        self.outbox.continue_parent(self.resume_parent_run_id)
        self.outbox.submit(StartSearch(name, params, artifacts, self._env,
                                       self.resume_parent_run_id, dataset))

    def start_trial(self, trial_id: str, params: dict[str, Any],
                    config: dict[str, Any] | None = None, role: str = "trial",
                    tags: dict[str, str] | None = None) -> None:
        # Copies: a held step must keep the values of its event, whatever the caller changes.
        # The device tags come from the trial's own report (`log_system`), not the driver's.
        self.outbox.submit(StartTrial(trial_id, dict(params),
                                      {**search_wide(self._env), "orchestrator.role": str(role),
                                       **(tags or {})},
                                      dict(config) if config is not None else None))

    def log_epoch(self, trial_id: str, metrics: dict[str, float], step: int) -> None:
        self.outbox.submit(LogEpoch(trial_id, dict(metrics), step, _now_ms()))

    def log_system(self, trial_id: str, samples: list, tags: dict[str, str]) -> None:
        points = self.system_metrics.points(trial_id, samples) if self.system_metrics else []
        if points or tags:
            self.outbox.submit(LogSystem(trial_id, points, dict(tags)))

    def end_trial(self, trial_id: str, status: str, metrics: dict[str, float],
                  reason: str | None = None, tags: dict[str, str] | None = None) -> None:
        if self.system_metrics is not None:
            self.system_metrics.forget(trial_id)
        self.outbox.submit(EndTrial(trial_id, status, dict(metrics), reason, _now_ms(),
                                    dict(tags or {})))

    def discard_trial(self, trial_id: str) -> None:
        self.outbox.submit(DiscardTrial(trial_id))

    def end_search(self, artifacts: dict[str, str | bytes], trial_tags: dict[str, dict[str, str]],
                   metrics: dict[str, float]) -> None:
        self.outbox.submit(EndSearch(artifacts, trial_tags, metrics, _now_ms()))
        if not self.outbox.drain(self.retry_window_s):
            directory = self.fallback_dir or Path.cwd()
            message = self.outbox.fall_back(directory)
            self.location = f"sqlite:///{directory / 'mlflow-fallback.db'}"
            self.outbox.say(message)

    def interrupt_search(self) -> None:
        self.outbox.submit(InterruptSearch(_now_ms()))
        self.outbox.drain(30.0)  # a short wait: the resume hint must not wait on a dead store


def _now_ms() -> int:
    # The event's time, not the write's: a retried write then repeats the same point.
    return int(time.time() * 1000)
