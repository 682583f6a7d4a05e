"""Ctrl-C and SIGTERM during a search: the first stops cleanly and leaves it resumable, a second
stops at once.

First signal while trials run (inside `fitting()`): Tune's own stop is triggered (its SIGUSR1
handler: the loop ends after saving the experiment state), and the trials still running end
`interrupted`. First signal between trials (preparing, writing results): the stage is stopped
where it is (`Stop`, a KeyboardInterrupt). Either way the search then ends with
`SearchInterrupted`: its MLflow parent run is KILLED and tagged `interrupted`, its folder stays
unfinished, and the CLI prints `orchestrator resume DIR`, which goes on from the stage it
stopped in. Second signal: KeyboardInterrupt at once. Tune's own SIGINT handler and its
`Tuner.restore(...)` hint are switched off: this tool's resume command is the one to use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SearchInterrupted(Exception):
    """The search was stopped by a signal; `directory` resumes it."""

    def __init__(self, directory: Path):
        self.directory = directory
        super().__init__(f"search interrupted; continue it with: orchestrator resume {directory}")


class Stop(KeyboardInterrupt):
    """The first signal, raised where the driver was when no trial was running."""


class Interrupts:
    """Context manager around a search's stages that owns SIGINT and SIGTERM (main thread only).
    `on_stop` is called once, at the first signal (the trial book then ends open trials as
    `interrupted`)."""

    def __init__(self, out: TextIO = sys.stdout, on_stop: Callable[[], None] = lambda: None):
        self.out, self.on_stop = out, on_stop
        self.interrupted, self._fitting, self._saved = False, False, {}

    def __enter__(self) -> Interrupts:
        self._env = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        tune_logger = logging.getLogger("ray.tune.tune")
        self._level = tune_logger.level
        tune_logger.setLevel(logging.CRITICAL)  # no "Tuner.restore(...)" hint, no stop banner
        self.install()
        return self

    def install(self) -> None:
        """Own the signals (again): `ray.init` installs a SIGTERM handler of its own in the
        driver, so the search calls this once Ray has started."""
        try:
            for signum in SIGNALS:
                previous = signal.signal(signum, self._handle)
                self._saved.setdefault(signum, previous)
        except ValueError:  # not the main thread: signals stay as they are
            pass

    @contextlib.contextmanager
    def fitting(self):
        """Around `tuner.fit()`: a first signal then asks Tune to stop its trials."""
        self._fitting = True
        try:
            yield
        finally:
            self._fitting = False

    def _handle(self, signum: int, frame) -> None:
        if self.interrupted:
            raise KeyboardInterrupt  # the second signal: stop at once
        self.interrupted = True
        self.on_stop()
        name = signal.Signals(signum).name
        if not self._fitting:
            print(f"\n{name}: stopping the search (press Ctrl-C again to quit at once)",
                  file=self.out, flush=True)
            raise Stop
        print(f"\n{name}: stopping the search; running trials end as 'interrupted' (press "
              "Ctrl-C again to quit at once)", file=self.out, flush=True)
        tune_stop = signal.getsignal(signal.SIGUSR1)  # installed by Tune for this fit
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
