"""What a training process says about the machine it runs on: system samples and node tags.

Every process that trains (the Tune trial process of a single-worker trial, each Ray Train worker
of a worker group) samples its own node in a background thread: CPU utilisation and memory, and
GPU utilisation, memory and power through NVML where the process has GPUs. The samples ride on
the reports the trial already sends (`attach` wraps a session's report), so they reach the
search driver, which writes them to the trial's MLflow run as `system/...` metrics, with the
time each was taken. Workers need no access to the tracking store.

A report carries, under `SYSTEM_KEY`, a dict (never a number, so it can never become a
leaderboard metric): `samples`, [[timestamp_ms, {name: value}], ...] taken since the previous
report (the final report takes one more sample, so the series reaches the end of training), and,
in the first report of each process, `tags`: the node (`node.id`, `node.ip`, `node.hostname`)
and what the process trains with (`env.device`, `env.torch`, `env.cuda`, `env.gpu_count`).

Names follow MLflow's own system-metrics monitor (mlflow/system_metrics/metrics/), without its
`system/` prefix, which the driver adds. A worker group's rank 0 keeps the usual names; rank r
gets `rank{r}/` before its sample names and `node.rank{r}.` in its node tags (`merge_ranks`).
"""

from __future__ import annotations

import os
import platform
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

SYSTEM_KEY = "system"
"""The report key that carries a training process's samples and tags."""
INTERVAL_ENV = "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"  # MLflow's own setting, same meaning
DEFAULT_INTERVAL_S = 1.0
NODE_TAGS = ("env.device", "env.torch", "env.cuda", "env.gpu_count")
"""Environment tags that only the training process can tell: the driver's would be wrong on a
cluster (its head has no GPU)."""


def sampling_interval_s() -> float:
    """Seconds between samples: $MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL, else 1 s (trials last
    seconds to minutes; MLflow's own default of 10 s would leave a short trial without any)."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 else DEFAULT_INTERVAL_S


def _visible_gpus() -> list[Any]:
    """NVML handles of the GPUs this process may use, in CUDA's order (`cuda:0` first): those
    CUDA_VISIBLE_DEVICES names (Ray sets it to the worker's own GPUs), else every GPU. Empty
    without NVML, a driver or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001 - no library, no driver, no GPU: nothing to sample
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    handles = []
    for name in (v.strip() for v in visible.split(",") if v.strip()):
        try:
            handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(name)) if name.isdigit()
                           else pynvml.nvmlDeviceGetHandleByUUID(name))
        except Exception:  # noqa: BLE001 - a name NVML does not know: skip it
            continue
    return handles


def sample(gpus: list[Any]) -> dict[str, float]:
    """One sample of this node (and of `gpus`), named as MLflow's monitors name them."""
    import psutil

    memory = psutil.virtual_memory()
    values = {"cpu_utilization_percentage": psutil.cpu_percent(),  # since the previous call
              "system_memory_usage_megabytes": memory.used / 1e6,
              "system_memory_usage_percentage": memory.used / memory.total * 100}
    if gpus:
        import pynvml

        for i, handle in enumerate(gpus):
            # Each reading on its own: a GPU that does not report power still reports memory.
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                values[f"gpu_{i}_memory_usage_megabytes"] = mem.used / 1e6
                values[f"gpu_{i}_memory_usage_percentage"] = mem.used / mem.total * 100
            except pynvml.NVMLError:
                pass
            try:
                values[f"gpu_{i}_utilization_percentage"] = float(
                    pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except pynvml.NVMLError:
                pass
            try:
                watts = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
                values[f"gpu_{i}_power_usage_watts"] = watts
                values[f"gpu_{i}_power_usage_percentage"] = \
                    watts * 1000 / pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) * 100
            except pynvml.NVMLError:
                pass
    return values


def device_tags(device: Any = None) -> dict[str, str]:
    """`env.*` tags of what this process trains with: `device` (a torch.device; default: its
    first GPU if it has one), the torch build, its CUDA version and how many GPUs it sees."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    on_gpu = gpus > 0 and (device is None or getattr(device, "type", str(device)) == "cuda")
    index = getattr(device, "index", None) or 0
    name = torch.cuda.get_device_name(index) if on_gpu else \
        f"cpu ({platform.processor() or platform.machine()})"
    return {"env.device": name, "env.torch": torch.__version__,
            "env.cuda": torch.version.cuda or "none", "env.gpu_count": str(gpus)}


def node_tags() -> dict[str, str]:
    """Which Ray node this process runs on (outside Ray: just the host name)."""
    tags = {"node.hostname": socket.gethostname()}
    try:
        import ray

        if ray.is_initialized():
            tags["node.id"] = ray.get_runtime_context().get_node_id()
            tags["node.ip"] = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - the tags are a record, never a reason to fail a trial
        pass
    return tags


class NodeSampler:
    """Samples this process's node every `interval_s` in a daemon thread until `stop`; `payload`
    hands over what was sampled since it was last called. Use as a context manager."""

    def __init__(self, device: Any = None, interval_s: float | None = None):
        self.interval_s = interval_s or sampling_interval_s()
        self.device = device
        self._samples: list[list] = []
        self._lock = threading.Lock()  # guards _samples
        self._reading = threading.Lock()  # one reading at a time (psutil keeps its last one)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._tags: dict[str, str] | None = None
        self._gpus: list[Any] = []

    def start(self) -> NodeSampler:
        import psutil

        self._gpus = _visible_gpus()
        self._tags = {**node_tags(), **device_tags(self.device)}
        psutil.cpu_percent()  # the first reading is meaningless: it starts psutil's interval
        self._take()  # one at the start: the series covers training from its first step
        self._thread = threading.Thread(target=self._loop, name="node-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self._take()

    def _take(self) -> None:
        try:
            with self._reading:
                point = [int(time.time() * 1000), sample(self._gpus)]
        except Exception:  # noqa: BLE001 - a failed reading costs one point, not the trial
            return
        with self._lock:
            self._samples.append(point)

    def payload(self, final: bool = False) -> dict[str, Any]:
        """The samples taken since the last call (and, the first time, the tags). `final`: take
        one more now, so the series reaches the end of training."""
        if final:
            self._take()
        with self._lock:
            samples, self._samples = self._samples, []
        out: dict[str, Any] = {"samples": samples}
        if self._tags is not None:
            out["tags"], self._tags = self._tags, None
        return out

    def attach(self, report: Callable[[dict, Any], None]) -> Callable[[dict, Any], None]:
        """`report` (metrics, checkpoint) with this sampler's payload added to every report."""
        def with_samples(metrics: dict, checkpoint: Any = None) -> None:
            payload = self.payload(final=bool(metrics.get("done")))
            report({**metrics, SYSTEM_KEY: payload}, checkpoint)

        return with_samples

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> NodeSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def merge_ranks(payloads: list[dict | None]) -> dict[str, Any] | None:
    """One payload for a worker group's report from each rank's (`payloads[r]` from rank r):
    rank 0's samples and tags under the usual names, rank r's samples under `rank{r}/` and its
    node tags as `node.rank{r}.id` etc.; `env.gpu_count` counts the GPUs of every rank."""
    if not any(payloads):
        return None
    samples: list[list] = []
    tags: dict[str, str] = {}
    gpu_count = 0
    for rank, payload in enumerate(payloads):
        if not payload:
            continue
        prefix = "" if rank == 0 else f"rank{rank}/"
        samples += [[t, {prefix + k: v for k, v in values.items()}]
                    for t, values in payload.get("samples", [])]
        own = payload.get("tags") or {}
        gpu_count += int(own.get("env.gpu_count", 0) or 0)
        for key, value in own.items():
            if rank == 0:
                tags[key] = value
            elif key.startswith("node."):
                tags[f"node.rank{rank}.{key.removeprefix('node.')}"] = value
    if tags:
        tags["env.gpu_count"] = str(gpu_count)
    out: dict[str, Any] = {"samples": samples}
    if tags:
        out["tags"] = tags
    return out
