"""Resources that fit the nodes: a single-worker GPU trial asks for the CPUs beside one GPU (it
fits a 4-CPU 1-GPU node), and a Ray with fewer CPUs than the machine's cores is planned on Ray's
count. Each case runs in a subprocess (tests/integration/resources_probe.py). Run:
    flock /tmp/ray.lock python -m pytest -q tests/integration/test_resources_fit.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.resources import local_resources, ray_cpu_count

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _probe(case: str, out: Path) -> dict:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.resources_probe", case, str(out)],
        cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)  # on a timeout, stop it and all it started
    try:
        output, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = [ln for ln in output.splitlines() if ln.startswith("RESOURCES ")]
    assert proc.returncode == 0 and lines, output[-5000:]
    return json.loads(lines[-1].removeprefix("RESOURCES "))


def test_single_worker_gpu_trial_fits_a_one_gpu_node(tmp_path):
    report = _probe("gpu", tmp_path)
    assert report["free"] == [8, 2, 4]  # the CPU-only head's cores are no use to a GPU worker
    assert report["plan"] == [True, 8, 2, 4]  # 2-worker trials: 2 GPUs, 4 CPUs beside each
    assert report["single_bundles"] == [{"CPU": 4, "GPU": 1}]  # not 8 CPUs beside 1 GPU
    assert report["single_fits"] and report["pair_fits"]


def test_plan_follows_rays_cpu_count_not_the_cores(tmp_path):
    assert local_resources()[0] == ray_cpu_count()
    report = _probe("cpu", tmp_path)
    assert report["ray_cpus"] == 1
    assert report["status"] == "completed"  # it started: the plan asked for what Ray has
    assert "1 CPUs per trial" in report["plan_line"][0]
