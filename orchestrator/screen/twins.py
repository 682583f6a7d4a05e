"""What a confirmation that ended says about its twins, taught to the evidence.

Twins train the same run but for their precision and speed switches (trainables/identity.
twin_key); the evidence keeps the earliest epoch each run can reach the target at, and the
stopper cuts a twin that cannot win after two of its epochs (orchestrator/evidence.py says why).
A live trial teaches its twins through the stopper; this teaches what ended before this search
started: an earlier search's confirmations, and this search's own before a stop.
"""

from __future__ import annotations

from orchestrator.curves import first_at
from orchestrator.evidence import Evidence
from trainables.status import traits


def teach_twins(evidence: Evidence, knobs: dict, curve: list | None, target: float,
                status: str) -> None:
    """The epoch a run reached `target` at, or the last it trained without. One that failed
    says nothing about learning."""
    if curve and not traits(status).failed:
        reached = first_at(curve, target)
        epoch = reached.epoch if reached else int(curve[-1][0])
        evidence.learn_twin(knobs, epoch, reached is not None)
