"""The resource plan: trial size and concurrency from the cluster's resources (no Ray needed)."""

from __future__ import annotations

import subprocess

import pytest

from orchestrator import resources
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


def _a_start_that_times_out(started: list):
    """A start that leaves a process running and fails as Ray's raylet wait does, once."""
    def start():
        started.append(subprocess.Popen(["sleep", "60"]))
        if len(started) == 1:
            raise Exception("The current node timed out during startup. This could happen "
                            "because some of the raylet failed to startup or the GCS has "
                            "become overloaded.")
    return start


def test_a_local_ray_that_timed_out_starting_is_stopped_and_started_once_more(caplog):
    started: list = []
    try:
        resources._start_twice_if_slow(_a_start_that_times_out(started))
        assert len(started) == 2
        assert started[0].poll() is not None, "what the failed start left still runs"
        assert started[1].poll() is None, "the second start's processes were stopped"
        assert "starting it again" in caplog.text
    finally:
        for process in started:
            process.kill()
            process.wait()


def test_a_local_ray_is_started_at_most_twice_and_other_errors_not_again():
    started: list = []

    def fails(err):
        def start():
            started.append(err)
            raise err
        return start

    timeout = Exception("The current node timed out during startup.")
    with pytest.raises(Exception, match="timed out during startup"):
        resources._start_twice_if_slow(fails(timeout))
    assert started == [timeout, timeout]
    started.clear()
    with pytest.raises(ValueError):
        resources._start_twice_if_slow(fails(ValueError("bad address")))
    assert len(started) == 1


def test_a_figure_names_its_cpus_family_and_model_where_the_vm_names_no_number(monkeypatch):
    """Two days' "AMD EPYC"s were a family-25 and a family-26 CPU, one baseline 86 s, the other
    53 s: a cost in baseline runs from one does not compare with the other's."""
    from orchestrator import machine

    info = "cpu family\t: {}\nmodel\t\t: {}\nmodel name\t: {}\nflags\t\t: fpu avx512_bf16\n"
    monkeypatch.setattr(machine, "_cpuinfo", lambda: info.format(26, 2, "AMD EPYC"))
    assert machine.describe().startswith("AMD EPYC (family 26 model 2), ")
    assert machine.describe().endswith(", avx512_bf16")
    named = "Intel(R) Xeon(R) Platinum 8488C"
    monkeypatch.setattr(machine, "_cpuinfo", lambda: info.format(6, 143, named))
    assert machine.describe().startswith(named + ", ")
