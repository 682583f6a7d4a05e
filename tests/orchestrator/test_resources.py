"""The resource plan: trial size and concurrency from the cluster's resources (no Ray needed)."""

from __future__ import annotations

import pytest

from orchestrator.resources import plan, worker_cpu_limit


def test_one_machine_gives_a_trial_every_core():
    p = plan(2, 0, cpus_per_trial=None, max_concurrent=None, max_workers=2, worker_cpus=2)
    assert (p.use_gpu, p.cpus_per_trial, p.max_concurrent_trials, p.cpus_per_worker) == \
        (False, 2, 1, None)


def test_cpu_cluster_gives_a_trial_one_node_and_runs_one_per_node():
    nodes = [{"CPU": 0}, {"CPU": 8}, {"CPU": 8}, {"CPU": 8}]
    p = plan(24, 0, cpus_per_trial=None, max_concurrent=None, worker_cpus=worker_cpu_limit(nodes))
    assert (p.cpus_per_trial, p.max_concurrent_trials) == (8, 3)
    assert plan(24, 0, cpus_per_trial=None, max_concurrent=2,
                worker_cpus=8).max_concurrent_trials == 2


def test_cpu_trial_that_cannot_fit_on_a_node_fails_early():
    with pytest.raises(ValueError, match="largest node"):
        plan(16, 0, cpus_per_trial=16, max_concurrent=None, max_workers=1, worker_cpus=8)
    with pytest.raises(ValueError, match="more than the 4 CPUs"):
        plan(4, 0, cpus_per_trial=8, max_concurrent=None)


def test_gpu_workers_get_a_gpu_and_the_cpus_beside_it():
    # CPU-only head (8), two 1-GPU nodes (4 CPUs), one 8-GPU node (192 CPUs).
    nodes = [{"CPU": 8}, {"CPU": 4, "GPU": 1}, {"CPU": 4, "GPU": 1}, {"CPU": 192, "GPU": 8}]
    assert worker_cpu_limit(nodes) == 4
    p = plan(208, 10, cpus_per_trial=None, max_concurrent=None, max_workers=2,
             worker_cpus=worker_cpu_limit(nodes))
    assert (p.use_gpu, p.gpus_per_trial, p.max_concurrent_trials) == (True, 2, 5)
    assert (p.cpus_per_trial, p.cpus_per_worker) == (8, 4)


def test_worker_cpu_limit_without_gpus_is_the_biggest_node():
    assert worker_cpu_limit([{"CPU": 2}, {"CPU": 16}]) == 16
    assert worker_cpu_limit([]) == 1
