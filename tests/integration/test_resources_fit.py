"""Resources that fit the nodes: a single-worker GPU trial asks for the CPUs beside one GPU (it
fits a 4-CPU 1-GPU node), and a Ray with fewer CPUs than the machine's cores is planned on Ray's
count. Each case runs in a subprocess (tests/integration/resources_probe.py, started with the
other probes by tests/integration/probes.py). Run:
    flock /tmp/ray.lock python -m pytest -q tests/integration/test_resources_fit.py
"""

from __future__ import annotations

import pytest

from orchestrator.resources import local_resources, ray_cpu_count

pytestmark = pytest.mark.integration


def test_single_worker_gpu_trial_fits_a_one_gpu_node(probes):
    report = probes["gpu"].checked()
    assert report["free"] == [8, 2, 4]  # the CPU-only head's cores are no use to a GPU worker
    assert report["plan"] == [True, 8, 2, 4]  # 2-worker trials: 2 GPUs, 4 CPUs beside each
    assert report["single_bundles"] == [{"CPU": 4, "GPU": 1}]  # not 8 CPUs beside 1 GPU
    assert report["single_fits"] and report["pair_fits"]


def test_plan_follows_rays_cpu_count_not_the_cores(probes):
    assert local_resources()[0] == ray_cpu_count()
    report = probes["cpu"].checked()
    assert report["ray_cpus"] == 1
    assert report["status"] == "completed"  # it started: the plan asked for what Ray has
    assert "1 CPUs per trial" in report["plan_line"][0]
