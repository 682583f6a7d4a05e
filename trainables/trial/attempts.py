"""Which trial failures are retried: only the loss of a worker or node.

Ray Train's own FailureConfig retries every worker-group error, deterministic ones included (an
out-of-memory model was built 9 times for one 2-worker trial). So Train gets `max_failures=0`, and
a trial runs its worker group through `fit_group`: an error that `status_of` calls a loss starts
a fresh group, which resumes from the run's last checkpoint (same run name and storage: Train
reloads its checkpoint manager from there); any other error is the trial's outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainables.status import Outcome, status_of

# Worker-group restarts per trial (from the last checkpoint) after a lost worker or node.
WORKER_RESTARTS = 2


def fit_group(make_trainer: Callable[[], Any], restarts: int = WORKER_RESTARTS) -> Outcome | None:
    """Fit the trainer `make_trainer` builds; None when it finished, else how it failed."""
    for attempt in range(restarts + 1):
        try:
            make_trainer().fit()
            return None
        except Exception as err:  # noqa: BLE001 - every error becomes an outcome or a retry
            outcome = status_of(err)
            if not (outcome.retry and attempt < restarts):
                return outcome
    return None  # unreachable: the last attempt returns its outcome
