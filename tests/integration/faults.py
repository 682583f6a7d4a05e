"""Test-only model builders that make a trial's training process die, to test recovery from a
checkpoint.

Used as a `module:function` workload: `base={"workload": "tests.integration.faults:dies_once"}`.
The workers import this module, so the repository root must be on their path (it is when pytest
runs from the repository root, or with PYTHONPATH set).
"""

from __future__ import annotations

import os
import signal
import time

from trainables.models import build_classifier

KILL_AT_STEP = 20
"""The training step at which the first attempt dies: in epoch 2 of the tests' tiny data
(240 samples / batch 16 = 15 steps an epoch), after epoch 1's checkpoint."""


def _resuming() -> bool:
    """A checkpoint exists: in a Ray Train worker, or in a single-worker trial that trains in
    the Tune trial process (where Ray Train's get_checkpoint refuses to run)."""
    import ray.train
    import ray.tune

    try:
        return ray.train.get_checkpoint() is not None
    except DeprecationWarning:
        return ray.tune.get_checkpoint() is not None


def dies_once(cfg, meta):
    """The classifier; on a fresh start (no checkpoint to resume) its worker process kills itself
    with SIGKILL at step `KILL_AT_STEP`, as a node or OOM failure would. A restarted worker
    resumes from a checkpoint and so never dies again."""
    model = build_classifier(cfg, meta)
    if _resuming():
        return model
    steps = 0

    def count_and_die(module, args):
        nonlocal steps
        if not module.training:
            return
        steps += 1
        if steps == KILL_AT_STEP:
            # Give the controller time to register epoch 1's checkpoint (it polls its workers).
            time.sleep(2)
            os.kill(os.getpid(), signal.SIGKILL)

    model.register_forward_pre_hook(count_and_die)
    return model
