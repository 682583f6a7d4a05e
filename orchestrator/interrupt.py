"""Ctrl-C and SIGTERM during a search: the first stops cleanly and leaves it resumable, a second
stops at once.

First signal: Tune's own stop is triggered (its SIGUSR1 handler: the loop ends after saving the
experiment state, so the trials still running stay resumable); afterwards every trial still
running is recorded as `interrupted` (MLflow KILLED), the parent run is tagged `interrupted`,
`search_state.json` keeps `finished: false`, and the search ends with `SearchInterrupted`,
which the CLI turns into `orchestrator resume DIR`. Second signal: KeyboardInterrupt at once.
Tune's own SIGINT handler and its `Tuner.restore(...)` hint are switched off: this tool's
resume command is the one to use.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TextIO

from orchestrator.trial_book import CUT_REASON
from trainables.status import TrialStatus

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SearchInterrupted(Exception):
    """The search was stopped by a signal; `directory` resumes it."""

    def __init__(self, directory: Path):
        self.directory = directory
        super().__init__(f"search interrupted; continue it with: orchestrator resume {directory}")


class Interrupts:
    """Context manager around `tuner.fit()` that owns SIGINT and SIGTERM (main thread only)."""

    def __init__(self, out: TextIO = sys.stdout):
        self.out, self.interrupted, self._saved = out, False, {}

    def __enter__(self) -> Interrupts:
        self._env = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        tune_logger = logging.getLogger("ray.tune.tune")
        self._level = tune_logger.level
        tune_logger.setLevel(logging.CRITICAL)  # no "Tuner.restore(...)" hint, no stop banner
        try:
            self._saved = {s: signal.signal(s, self._handle) for s in SIGNALS}
        except ValueError:  # not the main thread: signals stay as they are
            self._saved = {}
        return self

    def _handle(self, signum: int, frame) -> None:
        if self.interrupted:
            raise KeyboardInterrupt  # the second signal: stop at once
        self.interrupted = True
        print(f"\n{signal.Signals(signum).name}: stopping the search; running trials end as "
              "'interrupted' (press Ctrl-C again to quit at once)", file=self.out, flush=True)
        tune_stop = signal.getsignal(signal.SIGUSR1)  # installed by Tune for the fit
        if callable(tune_stop):
            tune_stop(signal.SIGUSR1, frame)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        if self._env is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = self._env
        logging.getLogger("ray.tune.tune").setLevel(self._level)


def close_interrupted(book, tracker, out_dir: Path) -> SearchInterrupted:
    """Record the trials still running as interrupted and tag the parent run; the error to
    raise. A resume runs new trials in their places (see `trial_book.read_journal`)."""
    for rec in book.records.values():
        # Still open, or settled as cut by Tune's end of experiment: both were interrupted.
        if rec.ended is None or rec.reason == CUT_REASON:
            rec.ended, rec.status = time.time(), TrialStatus.INTERRUPTED.value
            rec.reason = "interrupted by a signal"
            book._print(f"{book._tag(rec)} interrupted after {rec.wall_s:.1f}s wall")
            tracker.end_trial(rec.trial_id, rec.status, rec.metrics, rec.reason)
            book._write(rec)  # journalled as interrupted: a resume runs a new trial instead
    outbox = getattr(tracker, "outbox", None)
    if outbox is not None:
        outbox.drain(30.0)
    if tracker.parent_run_id and tracker.location.startswith(("sqlite:", "http", "file:")):
        from mlflow.tracking import MlflowClient

        try:
            client = MlflowClient(tracker.location)
            client.set_tag(tracker.parent_run_id, "interrupted", "true")
            client.set_terminated(tracker.parent_run_id, "KILLED")
        except Exception as err:  # noqa: BLE001 - tracking must never hide the resume hint
            print(f"(could not tag the MLflow parent run: {err})", file=book.out)
    return SearchInterrupted(out_dir)
