"""Speed switches the loops share: autocast precision, memory format, device sync, peak memory."""

from __future__ import annotations

import contextlib
import resource

import torch

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta


def autocast(cfg: TrialConfig, device: torch.device):
    """Mixed precision: matmuls/convs run in bf16 or fp16, reductions stay fp32."""
    if cfg.precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if cfg.precision == "bf16-mixed" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def memory_format_for(cfg: TrialConfig, meta: DataMeta) -> torch.memory_format:
    """channels_last (NHWC) for 2D, channels_last_3d (NDHWC) for 3D, else the default (signals
    and feature vectors have no channels-last layout)."""
    if not cfg.channels_last or meta.spatial_dims not in (2, 3):
        return torch.contiguous_format
    return torch.channels_last_3d if meta.spatial_dims == 3 else torch.channels_last


def reset_peak_memory(device: torch.device) -> None:
    """Start this trial's peak from now: a reused actor (or worker) has run earlier trials, and
    their peak must not be reported as this one's."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        # Linux: writing 5 to clear_refs resets the process's peak RSS (VmHWM) to its current RSS.
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # not Linux: the peak below is then the process's lifetime peak


def peak_memory_mb(device: torch.device) -> float:
    """CUDA: peak allocated by tensors. CPU: peak resident set size of this process since
    `reset_peak_memory`."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def free_device_memory(device: torch.device) -> None:
    """After an out-of-memory error: drop what the failed trial left cached, so the next trial
    in this process starts with the device's memory free."""
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def sync(device: torch.device) -> None:
    # Timers read the host clock: wait for queued GPU work so the time is the work's time.
    if device.type == "cuda":
        torch.cuda.synchronize(device)
