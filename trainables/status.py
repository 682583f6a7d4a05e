"""Trial statuses: the one home of every word a trial can end with, and their groups.

A status is a `str` enum so that it compares equal to its word (what Tune results, the trial
journal, the leaderboard and MLflow tags carry) and serializes as plain text.
"""

from __future__ import annotations

from enum import StrEnum


class TrialStatus(StrEnum):
    RUNNING = "running"
    """Still training (an intermediate report)."""
    COMPLETED = "completed"
    """Ran every planned epoch."""
    EARLY_STOPPED = "early_stopped"
    """Stopped by its own early-stopping rule (no improvement for `early_stop_patience`)."""
    PRUNED = "pruned"
    """Stopped by the search: the scheduler (ASHA) or the time budget."""
    DIVERGED = "diverged"
    """The loss became NaN or inf."""
    INFEASIBLE = "infeasible"
    """The configuration cannot run here: out of memory, or no optimizer step fits its data."""
    FAILED = "failed"
    """An error that is not a property of the configuration (a crash, a lost worker)."""
    INTERRUPTED = "interrupted"
    """Still running when the user stopped the search (Ctrl-C, SIGTERM); a resume runs it again."""


# Trials that ran to a valid end: the leaderboard ranks them and the Pareto set is drawn from them.
RANKABLE = frozenset({TrialStatus.COMPLETED, TrialStatus.EARLY_STOPPED})

# Deterministic failures of a configuration: scored as the worst value, never retried.
FAILED_STATUSES = frozenset({TrialStatus.DIVERGED, TrialStatus.INFEASIBLE})

# Trial status -> MLflow run status.
MLFLOW_RUN_STATUS: dict[TrialStatus, str] = {
    TrialStatus.RUNNING: "RUNNING",
    TrialStatus.COMPLETED: "FINISHED",
    TrialStatus.EARLY_STOPPED: "FINISHED",
    TrialStatus.PRUNED: "KILLED",
    TrialStatus.DIVERGED: "FAILED",
    TrialStatus.INFEASIBLE: "FAILED",
    TrialStatus.FAILED: "FAILED",
    TrialStatus.INTERRUPTED: "KILLED",
}


def mlflow_run_status(status: str) -> str:
    """The MLflow run state for a trial status word (an unknown word is a failure)."""
    try:
        return MLFLOW_RUN_STATUS[TrialStatus(status)]
    except ValueError:
        return "FAILED"
