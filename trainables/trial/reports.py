"""How a worker-group trial's reports reach Tune, every one of them.

Ray's own bridge (`ray.tune.integration.ray_train.TuneReportCallback`) hands each report from the
Train controller to Tune through a queue that Tune's main thread polls, while the trial's
function thread, once `TorchTrainer.fit` returns, reports "finished". The two race: when the
"finished" lands first, Tune ends the trial and the last report, often its only one, is never
read (a 1-epoch trial ended `pruned` with no metrics in CI). So the controller's callback puts
reports in a queue of our own, and the function thread itself forwards them with
`ray.tune.report` while the trainer fits in a helper thread: one reporter, in order, nothing
left behind when the trial returns.

The controller also waits, at each report, until Tune has taken it (`ray.tune.report` returns
only once Tune chose to go on: a function trial reports synchronously). A trial Tune stops at
epoch d then stops where Tune saw it, as a trial in its own process does: its Ray Train
checkpoint of epoch d is the last one, never replaced by the next epoch's (Ray Train keeps one),
and a measured run can go on from it (orchestrator/measure.py). Without the wait a race winner's
group had trained on and dropped it before the stop reached it (once in CI).

Every rank's report also carries what that rank sampled of its node (trainables/trial/sampling.py);
the callback passes them all on with rank 0's metrics, the other ranks' named by rank.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import ray.train

from trainables.trial.sampling import SYSTEM_KEY, merge_ranks

T = TypeVar("T")

# How long the forwarding thread waits for a report before checking whether the fit ended.
_POLL_S = 0.5
# The longest the controller waits for Tune to take a report before it goes on regardless: a
# stall of the search's driver (its callbacks write every result) must not end in a hang.
_TAKEN_S = 600.0
# Where a worker group's report was checkpointed: Ray Train keeps it, not Tune, so the report
# names it (a measured run goes on from the race winner's: orchestrator/measure.py).
CHECKPOINT_KEY = "checkpoint_uri"


def checkpoint_uri(checkpoint) -> str | None:
    """Where a Ray checkpoint lies: its path on this machine's disk, else its URI."""
    if checkpoint is None:
        return None
    kind = getattr(checkpoint.filesystem, "type_name", "local")
    return checkpoint.path if kind == "local" else f"{kind}://{checkpoint.path}"


class ObjectiveReport(ray.train.UserCallback):
    """Runs in the Train controller: scores rank 0's metrics with the search's objective and
    queues them for `forward_reports`."""

    def __init__(self, reports, objective: Callable[[dict, dict], dict] | None, taken=None):
        self._reports = reports  # a ray.util.queue.Queue (an actor handle: picklable)
        self._taken = taken  # another: one item per report Tune took (`forward_reports`)
        self._objective = objective
        self._state: dict = {}  # the objective's memory across this trial's reports

    def after_report(self, run_context, metrics: list[dict], checkpoint) -> None:
        m = dict(metrics[0])  # rank 0 scores the whole validation set
        # `done` stays behind: the trial ends when its function returns, after the worker
        # group's teardown (a result marked done would end it while the group still tears down).
        m.pop("done", None)
        # Every rank sampled its own node: rank 0's samples keep their names, the others' are
        # named by rank (trainables/trial/sampling.py).
        system = merge_ranks([r.get(SYSTEM_KEY) for r in metrics])
        if system is not None:
            m[SYSTEM_KEY] = system
        if checkpoint is not None:
            m[CHECKPOINT_KEY] = checkpoint_uri(checkpoint)
        self._reports.put(self._objective(m, self._state) if self._objective else m)
        if self._taken is not None:
            self._wait_until_taken()

    def _wait_until_taken(self) -> None:
        try:
            self._taken.get(timeout=_TAKEN_S)
        except Exception:  # noqa: BLE001 - not taken in time (on, as Ray's own bridge goes), or
            pass  # the trial ended and its queue with it: nothing to wait for


def forward_reports(fit: Callable[[], T], reports, report: Callable[[dict], None],
                    taken=None) -> T:
    """Run `fit` in a helper thread and pass each queued report to `report` from this thread,
    until `fit` has returned and the queue is empty; once `report` returns, say so on `taken`
    (where the controller waits: `ObjectiveReport`). Returns what `fit` returned (or raises)."""
    from ray.util.queue import Empty

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fit()
        except BaseException as err:  # noqa: BLE001 - re-raised in the calling thread
            outcome["error"] = err

    # A daemon: when Tune stops the trial mid-fit, the trial's actor exits without waiting.
    thread = threading.Thread(target=target, name="trial-fit", daemon=True)
    thread.start()
    while True:
        # Read before taking: every report queued before fit returned is still taken below.
        finished = not thread.is_alive()
        try:
            item = reports.get(block=not finished, timeout=None if finished else _POLL_S)
        except Empty:
            if finished:
                break
            continue
        report(item)  # raises where Tune stopped the trial: nothing is said, the group waits
        if taken is not None:
            taken.put(True)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
