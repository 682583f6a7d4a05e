"""A training process samples its own node and ships the samples with its reports
(trainables/trial/sampling.py): what a report carries, how a worker group's ranks are named, GPUs
through NVML (a stand-in NVML here), and that the samples never become leaderboard metrics.
No Ray. Run: python -m pytest -q tests/trainables/test_sampling.py
"""

from __future__ import annotations

import sys
import time
import types

import pytest

from orchestrator.records import numeric_metrics
from trainables.trial.reports import ObjectiveReport
from trainables.trial.sampling import (INTERVAL_ENV, NODE_TAGS, SYSTEM_KEY, NodeSampler,
                                       merge_ranks, sample, sampling_interval_s)

CPU_MEMORY = {"cpu_utilization_percentage", "system_memory_usage_megabytes",
              "system_memory_usage_percentage"}


def test_reports_carry_the_samples_since_the_last_report_and_the_tags_once():
    sent = []
    with NodeSampler(interval_s=0.05) as sampler:
        report = sampler.attach(lambda metrics, checkpoint: sent.append((metrics, checkpoint)))
        time.sleep(0.3)
        report({"epoch": 1, "val_score": 0.5}, "ckpt")
        time.sleep(0.2)
        report({"epoch": 2, "val_score": 0.6, "done": True}, None)
        ended = time.time() * 1000
    (first, ckpt), (last, _) = sent
    assert ckpt == "ckpt" and first["val_score"] == 0.5  # the report itself is untouched
    one, two = first[SYSTEM_KEY], last[SYSTEM_KEY]
    assert len(one["samples"]) >= 4 and len(two["samples"]) >= 3  # every ~0.05 s
    assert set(NODE_TAGS) <= set(one["tags"]) and "node.hostname" in one["tags"]
    assert "tags" not in two  # once per process
    times = [t for t, _ in one["samples"] + two["samples"]]
    assert times == sorted(times) and len(set(times)) >= len(times) - 1  # none sent twice
    assert ended - times[-1] < 100  # the final report's own sample closes the series
    for _, values in one["samples"] + two["samples"]:
        assert set(values) == CPU_MEMORY  # no GPU on this machine: no GPU names
        assert 0 <= values["cpu_utilization_percentage"] <= 100


def test_samples_never_become_leaderboard_metrics():
    with NodeSampler(interval_s=10) as sampler:
        payload = sampler.payload(final=True)
    result = {"val_score": 0.5, "train_time_s": 2.0, SYSTEM_KEY: payload}
    assert numeric_metrics(result) == {"val_score": 0.5, "train_time_s": 2.0}


def test_the_interval_is_mlflows_setting(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert sampling_interval_s() == 1.0
    monkeypatch.setenv(INTERVAL_ENV, "0.25")
    assert sampling_interval_s() == 0.25 and NodeSampler().interval_s == 0.25
    monkeypatch.setenv(INTERVAL_ENV, "soon")
    assert sampling_interval_s() == 1.0


def test_a_worker_group_keeps_rank_zero_names_and_names_the_other_ranks():
    rank0 = {"samples": [[1, {"cpu_utilization_percentage": 10.0}]],
             "tags": {"node.id": "n0", "node.ip": "10.0.0.1", "env.device": "NVIDIA A10G",
                      "env.gpu_count": "1"}}
    rank1 = {"samples": [[2, {"cpu_utilization_percentage": 20.0,
                              "gpu_0_utilization_percentage": 90.0}]],
             "tags": {"node.id": "n1", "node.ip": "10.0.0.2", "env.device": "NVIDIA A10G",
                      "env.gpu_count": "1"}}
    merged = merge_ranks([rank0, rank1])
    assert merged["samples"] == [
        [1, {"cpu_utilization_percentage": 10.0}],
        [2, {"rank1/cpu_utilization_percentage": 20.0,
             "rank1/gpu_0_utilization_percentage": 90.0}]]
    assert merged["tags"] == {"node.id": "n0", "node.ip": "10.0.0.1", "node.rank1.id": "n1",
                              "node.rank1.ip": "10.0.0.2", "env.device": "NVIDIA A10G",
                              "env.gpu_count": "2"}
    later = merge_ranks([{"samples": [[3, {"cpu_utilization_percentage": 1.0}]]},
                         {"samples": []}])
    assert "tags" not in later and len(later["samples"]) == 1
    assert merge_ranks([None, None]) is None


def test_objective_report_sends_every_ranks_samples_with_rank_zeros_metrics():
    class Queue(list):
        put = list.append

    queue = Queue()
    callback = ObjectiveReport(queue, None)
    callback.after_report(None, [
        {"val_score": 0.5, "done": True, SYSTEM_KEY: {"samples": [[1, {"cpu": 1.0}]]}},
        {"val_score": 0.1, SYSTEM_KEY: {"samples": [[2, {"cpu": 2.0}]]}}], None)
    callback.after_report(None, [{"val_score": 0.7}, {"val_score": 0.7}], None)
    assert queue[0] == {"val_score": 0.5, SYSTEM_KEY: {
        "samples": [[1, {"cpu": 1.0}], [2, {"rank1/cpu": 2.0}]]}}
    assert queue[1] == {"val_score": 0.7}  # a report without samples stays as it was


@pytest.fixture
def two_gpus(monkeypatch):
    """A stand-in NVML with two GPUs (the real one needs a driver)."""
    class NVMLError(Exception):
        pass

    handles = {0: "gpu0", 1: "gpu1"}
    fake = types.SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: handles[i],
        nvmlDeviceGetHandleByUUID=lambda uuid: {"GPU-b": "gpu1"}[uuid],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=4e9, total=16e9),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(
            gpu=80 if h == "gpu1" else 10),
        nvmlDeviceGetPowerUsage=lambda h: (_ for _ in ()).throw(NVMLError("not supported")),
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 300_000)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.mark.parametrize("visible", ["1", "GPU-b"])
def test_a_process_samples_the_gpus_it_was_given_named_as_it_sees_them(two_gpus, monkeypatch,
                                                                       visible):
    from trainables.trial.sampling import _visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)  # what Ray gives a one-GPU worker
    gpus = _visible_gpus()
    assert gpus == ["gpu1"]
    values = sample(gpus)
    # Its one GPU is its cuda:0, so gpu_0; a reading the GPU lacks (power) is left out.
    assert values["gpu_0_utilization_percentage"] == 80.0
    assert values["gpu_0_memory_usage_megabytes"] == 4000.0
    assert values["gpu_0_memory_usage_percentage"] == 25.0
    assert not any("power" in k or "gpu_1" in k for k in values)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _visible_gpus() == ["gpu0", "gpu1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a CPU worker on a GPU node
    assert _visible_gpus() == []


def test_without_nvml_there_are_no_gpu_samples(monkeypatch):
    from trainables.trial.sampling import _visible_gpus

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert _visible_gpus() == []
    assert set(sample([])) == CPU_MEMORY
