"""Experiment tracking: the `Tracker` interface and its null implementation (`tracker`), MLflow
(`MlflowTracker`, writing through `mlflow_writer`), the outbox that holds and retries writes
through a tracking-server outage (`outbox`), and environment tags (`environment`)."""

from orchestrator.tracking.environment import environment_tags
from orchestrator.tracking.tracker import MlflowTracker, NullTracker, Tracker

__all__ = ["MlflowTracker", "NullTracker", "Tracker", "environment_tags"]
