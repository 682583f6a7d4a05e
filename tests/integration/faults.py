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


# ---- a model that always runs out of memory in one region of the space ---------------------------
OOM_WIDTH = 1.0
"""Widths at or above this run out of memory at their first training step."""
BUILDS = "oom-model-builds"
"""Name of the Ray actor that counts model builds (workers and trials are other processes)."""


def build_counter():
    """The build counter, created on first use in namespace 'tests' (any process may ask)."""
    import ray

    @ray.remote(num_cpus=0)
    class Counter:
        def __init__(self):
            self.builds: list[float] = []

        def add(self, width: float) -> None:
            self.builds.append(width)

        def get(self) -> list[float]:
            return self.builds

        def reset(self) -> None:
            self.builds = []

    return Counter.options(name=BUILDS, namespace="tests", get_if_exists=True).remote()


def ooms_when_wide(cfg, meta):
    """The classifier; from OOM_WIDTH up, its first training forward raises the allocator's
    out-of-memory error: CUDA's on one worker, the CPU allocator's on several (both must become
    `infeasible`). Every build is counted, to show a deterministic failure is never retried."""
    import ray
    import torch

    ray.get(build_counter().add.remote(cfg.width))
    model = build_classifier(cfg, meta)
    if cfg.width < OOM_WIDTH:
        return model

    def out_of_memory(module, args):
        if module.training:
            if cfg.workers == 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                               "can't allocate memory: you tried to allocate 8589934592 bytes.")

    model.register_forward_pre_hook(out_of_memory)
    return model


# ---- a model slow enough to be stopped at a chosen epoch ------------------------------------------
SLOW_STEP_S = 0.04
"""Extra seconds per training step: the tests' tiny data (15 steps an epoch) then takes ~0.6 s an
epoch, so a signal sent when epoch 2 is printed lands inside epoch 3."""


def slow_classifier(cfg, meta):
    """The classifier, sleeping `SLOW_STEP_S` before each training forward."""
    model = build_classifier(cfg, meta)

    def wait(module, args):
        if module.training:
            time.sleep(SLOW_STEP_S)

    model.register_forward_pre_hook(wait)
    return model


OOM_BATCH = 64
"""Training batches at least this large run out of memory (`ooms_at_big_batch`)."""


def ooms_at_big_batch(cfg, meta):
    """The classifier; a training forward on OOM_BATCH samples or more raises CUDA's
    out-of-memory error, as a batch too big for the device does."""
    import torch

    model = build_classifier(cfg, meta)

    def out_of_memory(module, args):
        if module.training and args[0].shape[0] >= OOM_BATCH:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    model.register_forward_pre_hook(out_of_memory)
    return model
