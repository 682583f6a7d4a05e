"""Exceptions become trial statuses in one place (`status_of`), for both paths: the error a
trial's own process raises, and the worker-group error Ray Train raises for a failed rank.
Run: python -m pytest -q tests/trainables/test_status.py"""

from __future__ import annotations

import pytest
import torch
from ray.exceptions import ActorDiedError
from ray.train.v2._internal.exceptions import (UserExceptionWithTraceback,
                                               WorkerHealthCheckFailedError)
from ray.train.v2.api.exceptions import WorkerGroupError

from tests.trainables.helpers import fit_local
from trainables.status import (FAILED_STATUSES, RANKABLE, TrialStatus, mlflow_run_status,
                               status_of)

OOMS = [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79 GiB total)"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
                 "memory: you tried to allocate 34359738368 bytes."),
    MemoryError(),
]


def _group_error(*per_rank: Exception) -> WorkerGroupError:
    """What Ray Train raises when ranks fail: each rank's error, wrapped as Train wraps it."""
    return WorkerGroupError("ranks failed", {
        rank: UserExceptionWithTraceback(e, "Traceback ...") for rank, e in enumerate(per_rank)})


@pytest.mark.parametrize("err", OOMS, ids=["torch-oom", "cuda-text", "cpu-allocator", "memory"])
def test_out_of_memory_is_infeasible_on_both_paths(err):
    for raised in (err, _group_error(err, RuntimeError("gloo: connection closed by peer"))):
        outcome = status_of(raised)
        assert outcome.status == TrialStatus.INFEASIBLE
        assert outcome.reason.startswith("out of memory") and not outcome.retry


def test_one_rank_out_of_memory_decides_even_when_the_other_failed_in_a_collective():
    err = _group_error(RuntimeError("[gloo] Connection reset by peer"),
                       RuntimeError("DefaultCPUAllocator: can't allocate memory: 1 GB"))
    assert status_of(err).status == TrialStatus.INFEASIBLE


def test_non_finite_is_diverged_and_bad_config_is_infeasible():
    assert status_of(FloatingPointError("loss is nan")).status == TrialStatus.DIVERGED
    assert status_of(_group_error(ValueError("patch 40 > image 32"))).status == \
        TrialStatus.INFEASIBLE


def test_only_a_lost_worker_is_retried():
    lost = WorkerGroupError("worker died", {
        1: WorkerHealthCheckFailedError("health check failed", ActorDiedError())})
    assert status_of(lost).retry and status_of(lost).status == TrialStatus.FAILED
    assert status_of(ActorDiedError()).retry
    bug = status_of(_group_error(KeyError("oops")))
    assert bug.status == TrialStatus.FAILED and not bug.retry
    assert "KeyError" in bug.reason  # the user's own error is named, not Ray's wrapper


def test_status_groups():
    assert TrialStatus.FAILED in FAILED_STATUSES
    assert not RANKABLE & FAILED_STATUSES
    assert mlflow_run_status("infeasible") == "FAILED" and mlflow_run_status("pruned") == "KILLED"


def test_a_trial_without_an_optimizer_step_is_never_completed(tiny_npz):
    """240 samples, batch 256: drop_last leaves 0 steps. The trial ends infeasible at epoch 1."""
    reports: list[dict] = []
    final = fit_local(tiny_npz, reports, epochs=3, patch_size=12, width=0.5, batch_size=256)
    assert final["optimizer_steps"] == 0
    assert final["status"] == "infeasible" and final["done"] is True
    assert "0 optimizer steps" in final["reason"]
    assert len(reports) == 1


def test_peak_memory_is_this_trials_own():
    """A process that once held a large tensor reports a small peak for its next trial."""
    from trainables.loop.switches import peak_memory_mb, reset_peak_memory

    cpu = torch.device("cpu")
    big = torch.ones(64 * 2**20 // 4 * 8)  # 512 MiB touched
    big.add_(1)
    high = peak_memory_mb(cpu)
    del big
    reset_peak_memory(cpu)
    assert peak_memory_mb(cpu) < high - 400
