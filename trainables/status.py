"""Trial statuses: the one home of every word a trial can end with, and their groups.

A status is a `str` enum so that it compares equal to its word (what Tune results, the trial
journal, the leaderboard and MLflow tags carry) and serializes as plain text.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    DISCARDED = "discarded"
    """Cut short by the death of the search's driver: a resume runs a new trial in its place and
    deletes its partial MLflow run. Never in the leaderboard."""
    DUPLICATE = "duplicate"
    """Same knobs and seed as a trial already run in this search: reports that trial's recorded
    result instead of training again (`rerun_duplicates` turns this off)."""
    INTERRUPTED = "interrupted"
    """Still running when the user stopped the search (Ctrl-C, SIGTERM); a resume runs it again."""


# Trials that ran to a valid end: the leaderboard ranks them and the Pareto set is drawn from them.
RANKABLE = frozenset({TrialStatus.COMPLETED, TrialStatus.EARLY_STOPPED})

# Properties of the configuration itself: the sampler is told they violate a constraint, so it
# steers away from the region instead of merely ignoring the trial.
CONFIG_FAILURES = frozenset({TrialStatus.DIVERGED, TrialStatus.INFEASIBLE})

# Trials without a valid result: scored as the worst value, never ranked, never retried.
FAILED_STATUSES = CONFIG_FAILURES | {TrialStatus.FAILED}

# Trial status -> MLflow run status.
MLFLOW_RUN_STATUS: dict[TrialStatus, str] = {
    TrialStatus.RUNNING: "RUNNING",
    TrialStatus.COMPLETED: "FINISHED",
    TrialStatus.EARLY_STOPPED: "FINISHED",
    TrialStatus.PRUNED: "KILLED",
    TrialStatus.DIVERGED: "FAILED",
    TrialStatus.INFEASIBLE: "FAILED",
    TrialStatus.FAILED: "FAILED",
    TrialStatus.DISCARDED: "KILLED",
    TrialStatus.DUPLICATE: "FINISHED",
    TrialStatus.INTERRUPTED: "KILLED",
}


def mlflow_run_status(status: str) -> str:
    """The MLflow run state for a trial status word (an unknown word is a failure)."""
    try:
        return MLFLOW_RUN_STATUS[TrialStatus(status)]
    except ValueError:
        return "FAILED"


@dataclass(frozen=True)
class Outcome:
    """How an exception ends a trial: its status, a one-line reason, and whether running the
    trial again could end differently (only the loss of a worker or node can)."""

    status: TrialStatus
    reason: str
    retry: bool = False


# Exception class names (anywhere in the class's MRO) that mean a process or node was lost, not
# that the configuration is bad. Names, not imports: this module sits below Ray.
_LOSS = {"RayActorError", "ActorDiedError", "ActorUnavailableError", "NodeDiedError",
         "WorkerCrashedError", "OwnerDiedError", "WorkerHealthCheckFailedError",
         "WorkerGroupStartupFailedError", "WorkerGroupStartupTimeoutError"}
# Host allocator failures that torch raises as a plain RuntimeError.
_CPU_OOM = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def _causes(exc: BaseException):
    """The exception and what it wraps: Ray Train's worker-group error (each rank's failure),
    its user-exception and health-check wrappers, and Python's __cause__ chain."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        failures = getattr(e, "worker_failures", None)
        if isinstance(failures, dict):
            todo.extend(failures[k] for k in sorted(failures))
        for attr in ("_base_exc", "health_check_failure", "controller_failure", "cause"):
            inner = getattr(e, attr, None)
            if isinstance(inner, BaseException):
                todo.append(inner)
        todo.extend([e.__cause__, e.__context__])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _oom(e: BaseException) -> bool:
    text = str(e)
    return isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError" or \
        "CUDA out of memory" in text or any(m in text for m in _CPU_OOM)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` (or what it wraps) is running out of memory: what `status_of` calls
    infeasible. The speed profile lets these end the trial and drops a candidate for others."""
    return any(_oom(e) for e in _causes(exc))


def status_of(exc: BaseException) -> Outcome:
    """The one place an exception becomes a trial status (as Optuna turns exceptions into trial
    states), used by the in-process path and the worker-group path alike:

    * out of memory (CUDA OOM, the CPU allocator's failure, MemoryError) -> infeasible;
    * a non-finite value (FloatingPointError) -> diverged;
    * a bad configuration (ValueError) -> infeasible;
    * a lost worker or node -> failed, and worth a retry (the only retryable outcome);
    * anything else -> failed.
    A worker-group error is judged by what its ranks raised: a rank that ran out of memory
    decides it even when the other ranks then failed in a collective.
    """
    chain = list(_causes(exc))
    for e in chain:
        if _oom(e):
            return Outcome(TrialStatus.INFEASIBLE, f"out of memory: {_first_line(e)}")
    for e in chain:
        if isinstance(e, FloatingPointError):
            return Outcome(TrialStatus.DIVERGED, f"non-finite value: {_first_line(e)}")
    for e in chain:
        if {c.__name__ for c in type(e).__mro__} & _LOSS:
            return Outcome(TrialStatus.FAILED, f"worker or node lost: {_first_line(e)}",
                           retry=True)
    for e in chain:
        if isinstance(e, ValueError):
            return Outcome(TrialStatus.INFEASIBLE, f"invalid configuration: {_first_line(e)}")
    # Name the user's own error rather than Ray's wrapper around it.
    own = [e for e in chain if not type(e).__module__.startswith("ray.")]
    return Outcome(TrialStatus.FAILED, _first_line(own[0] if own else exc))
