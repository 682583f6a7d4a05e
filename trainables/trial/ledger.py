"""The search's ledger of configurations already run, so that none is trained twice.

Optuna's samplers re-suggest configurations on categorical spaces. A trial first asks the
ledger (a Ray actor the driver owns) about its (knobs, seed): if a trial of this search already
ran them to a deterministic end, it reports that trial's recorded result with status
`duplicate` instead of training. The driver's trial book writes each finished trial into the
ledger; a resumed search writes the journal's finished trials first.
"""

from __future__ import annotations

import time
from typing import Any

from trainables.status import REPEATABLE, TrialStatus

# Ends that are properties of the configuration: running it again would give the same answer
# (up to timing noise). A failed or pruned trial says nothing about its configuration.
RECORDED = REPEATABLE

# How often a trial looks again while another trial with its configuration is still running.
_POLL_S = 0.5


class Ledger:
    """key -> the first trial's recorded result; key -> the trial now running it (a claim)."""

    def __init__(self):
        self._results: dict[str, dict] = {}
        self._claims: dict[str, str] = {}

    def claim(self, key: str, trial_id: str) -> dict | None:
        """The recorded result for `key`; None when the caller should train (it now holds the
        claim); {"wait": owner} while another trial runs the same configuration."""
        if key in self._results:
            return self._results[key]
        owner = self._claims.setdefault(key, trial_id)
        return None if owner == trial_id else {"wait": owner}

    def record(self, key: str, result: dict) -> None:
        self._results.setdefault(key, result)
        self._claims.pop(key, None)

    def release(self, key: str, trial_id: str) -> None:
        """The claimer ended without a result worth keeping: the next asker trains."""
        if self._claims.get(key) == trial_id:
            del self._claims[key]

    def size(self) -> int:
        return len(self._results)


def start_ledger():
    """A ledger actor for one search; it holds no CPU and dies with the driver. It lives on the
    driver's node: placed on a worker node, it would die with that node and take the search
    with it (tests/integration/test_cluster_rehearsal.py loses a worker node mid-trial)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(Ledger).options(scheduling_strategy=here).remote()


def recorded_result(ledger, key: str, trial_id: str) -> dict | None:
    """Blocks while another trial runs the same configuration; None means: train it."""
    import ray

    while True:
        answer = ray.get(ledger.claim.remote(key, trial_id))
        if answer is None or "wait" not in answer:
            return answer
        time.sleep(_POLL_S)


def duplicate_report(recorded: dict) -> dict:
    """What a duplicate trial reports: the first trial's metrics, marked as a duplicate."""
    # Here, not at the top: the ledger actor's own process imports this module, and the
    # profile imports torch (1.4 s of each search's ledger start; a trial has it already).
    from trainables.loop.profile import PICK_PREFIX

    picks = {PICK_PREFIX + k: v for k, v in recorded.get("picks", {}).items()}
    return {**recorded["metrics"], **picks, "epoch": recorded.get("epochs", 0),
            "status": TrialStatus.DUPLICATE.value,
            "reason": f"same knobs and seed as trial {recorded['number']} "
                      f"({recorded['trial_id']}), which ended {recorded['status']}; "
                      "its result is reported, not trained again"}
