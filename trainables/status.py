"""Trial statuses: the one home of every word a trial can end with, and of what each means.

`STATUS_TABLE` gives every status its Optuna state, its MLflow run status, whether it is
rankable, and what a resume does with it; the live searcher (orchestrator/tune/searcher.py), the
resumed study (orchestrator/tune/history.py), the MLflow writer, the leaderboard and the journal all
read it, so a live search and a resume cannot disagree.

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
    DECIDED = "decided"
    """Stopped by the screen's race once its learning curve told its time to the target (an
    extrapolation with bounds, orchestrator/screen/race.py): not trained to the target; the
    fastest expected is then measured as it is handed over."""
    INTERRUPTED = "interrupted"
    """Still running when the user stopped the search (Ctrl-C, SIGTERM); a resume runs a new trial
    in its place."""

    @property
    def traits(self) -> Traits:
        """What this status means to Optuna, MLflow, the leaderboard and a resume."""
        return STATUS_TABLE[self]


class OnResume(StrEnum):
    """What `orchestrator resume` does with a trial the journal ended with this status."""

    KEEP = "keep"
    """A finished trial: it stays in the leaderboard and MLflow, and the resumed study is told
    of it as the live study was. It is never run again."""
    RUN_AGAIN = "run_again"
    """Cut short by the stop: journalled `discarded`, its partial MLflow run deleted, and a new
    trial takes its place in the trial count."""
    DROP = "drop"
    """Already replaced by an earlier resume: not a trial of the search any more."""


@dataclass(frozen=True)
class Traits:
    """What one status means to everyone who reads it (one row of `STATUS_TABLE`)."""

    optuna_state: str | None
    """The Optuna `TrialState` the study is told (`COMPLETE`, `PRUNED`, `FAIL`), live and on
    resume alike; None: never told (not a trial of the study)."""
    feasible: bool | None
    """COMPLETE trials only: whether the configuration could run (Optuna's constraint). A
    configuration that cannot run is told with the worst values and a violated constraint, so
    TPE and NSGA-II steer away from its region and no front ever holds it."""
    mlflow_status: str
    """The MLflow run status of the trial's run."""
    rankable: bool
    """Ran to a valid end: ranked on the leaderboard, eligible for the Pareto set and best."""
    on_resume: OnResume
    repeatable: bool
    """A property of the configuration: the same knobs and seed would end the same way, so a
    repeat proposal reports this result (`duplicate`) instead of training again."""
    failed: bool
    """No valid result: the objective scores it as the worst value."""


_T = Traits
STATUS_TABLE: dict[TrialStatus, Traits] = {
    #                          optuna      feasible mlflow     rankable on_resume       repeat failed
    TrialStatus.RUNNING:       _T("PRUNED",   None,  "RUNNING",  False, OnResume.RUN_AGAIN, False, False),  # noqa: E501
    TrialStatus.COMPLETED:     _T("COMPLETE", True,  "FINISHED", True,  OnResume.KEEP,      True,  False),  # noqa: E501
    TrialStatus.EARLY_STOPPED: _T("COMPLETE", True,  "FINISHED", True,  OnResume.KEEP,      True,  False),  # noqa: E501
    TrialStatus.PRUNED:        _T("PRUNED",   None,  "KILLED",   False, OnResume.KEEP,      False, False),  # noqa: E501
    TrialStatus.DIVERGED:      _T("COMPLETE", False, "FAILED",   False, OnResume.KEEP,      True,  True),   # noqa: E501
    TrialStatus.INFEASIBLE:    _T("COMPLETE", False, "FAILED",   False, OnResume.KEEP,      True,  True),   # noqa: E501
    TrialStatus.FAILED:        _T("FAIL",     None,  "FAILED",   False, OnResume.KEEP,      False, True),   # noqa: E501
    TrialStatus.DISCARDED:     _T(None,       None,  "KILLED",   False, OnResume.DROP,      False, False),  # noqa: E501
    TrialStatus.DUPLICATE:     _T("PRUNED",   None,  "FINISHED", False, OnResume.KEEP,      False, False),  # noqa: E501
    TrialStatus.DECIDED:       _T("PRUNED",   None,  "FINISHED", False, OnResume.KEEP,      False, False),  # noqa: E501
    TrialStatus.INTERRUPTED:   _T("PRUNED",   None,  "KILLED",   False, OnResume.RUN_AGAIN, False, False),  # noqa: E501
}
"""Why some rows read as they do:
* RUNNING is a trial that ended without a final report of its own: the scheduler (ASHA), the
  time budget or a signal stopped it. Optuna keeps its intermediate values as PRUNED.
* DUPLICATE reports another trial's result; that trial told the study already, so the repeat
  is PRUNED (it must not count twice). Its MLflow run is FINISHED: nothing went wrong.
* DECIDED stopped early on purpose, nothing went wrong (FINISHED), but its time to the target
  is expected, not measured: not rankable; the race's measure stage measures the fastest.
* INTERRUPTED is PRUNED in the live study, which ends with the driver; the resumed study never
  holds it: a new trial runs in its place."""


def traits(status: str) -> Traits:
    """The traits of a status word (what Tune results and the journal carry); an unknown word
    reads as `failed`."""
    try:
        return STATUS_TABLE[TrialStatus(status)]
    except ValueError:
        return STATUS_TABLE[TrialStatus.FAILED]


def _where(test) -> frozenset[TrialStatus]:
    return frozenset(s for s, t in STATUS_TABLE.items() if test(t))


# Groups, derived from the table (names kept for readers of sets).
RANKABLE = _where(lambda t: t.rankable)
CONFIG_FAILURES = _where(lambda t: t.feasible is False)
FAILED_STATUSES = _where(lambda t: t.failed)
REPEATABLE = _where(lambda t: t.repeatable)


def mlflow_run_status(status: str) -> str:
    """The MLflow run state for a trial status word (an unknown word is a failure)."""
    return traits(status).mlflow_status


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


def is_out_of_memory_text(reason: str) -> bool:
    """Whether an error's text (all that reaches the driver of a worker group's failure) says
    it ran out of memory."""
    return any(m in reason for m in ("OutOfMemoryError", "out of memory", *_CPU_OOM))


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
