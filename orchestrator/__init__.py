"""Search for the fastest way to train a PyTorch model without losing accuracy.

Ray Train runs each trial, Ray Tune + Optuna search the knobs against a combined accuracy-and-time
objective, MLflow records every trial.
"""

from orchestrator.api import (
    SearchResult,
    SearchSpec,
    load_config_file,
    resume_search,
    run_search,
    train_config,
)
from orchestrator.objective import TimeToTargetObjective, WeightedObjective, make_objective
from orchestrator.tracking import MlflowTracker, NullTracker, Tracker

__all__ = [
    "MlflowTracker",
    "NullTracker",
    "SearchResult",
    "SearchSpec",
    "TimeToTargetObjective",
    "Tracker",
    "WeightedObjective",
    "load_config_file",
    "make_objective",
    "resume_search",
    "run_search",
    "train_config",
]
