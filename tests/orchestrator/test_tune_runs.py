"""Ray Tune's own staging race is not shown as an error (orchestrator/tune_runs.py); every
other error from the same logger still is. No Ray."""

from __future__ import annotations

import logging
import sys

from orchestrator.tune_runs import _StagingRace


def _record(msg: str, error: BaseException | None) -> logging.LogRecord:
    try:
        if error:
            raise error
    except BaseException:  # noqa: BLE001
        info = sys.exc_info()
    else:
        info = None
    return logging.LogRecord("ray.tune.execution.experiment_state", logging.ERROR, __file__, 1,
                             msg, None, info)


def test_only_the_copy_of_a_vanished_temporary_file_is_dropped():
    race = _StagingRace()
    saving = "Saving experiment state to storage at '/x/ray/tune' failed with exception: "
    vanished = FileNotFoundError(
        "[Errno 2] Failed to open local file '/tmp/ray/.../driver_artifacts/"
        ".1db4-tmp-basic-variant-state-2026.json'")
    assert not race.filter(_record(saving, vanished))
    # A real failure to save (a full disk, a file that is not Tune's temporary) is shown.
    assert race.filter(_record(saving, OSError(28, "No space left on device")))
    assert race.filter(_record(saving, FileNotFoundError("/x/ray/tune/experiment_state.json")))
    assert race.filter(_record("another error", vanished))
