"""What this machine is, as far as a timing depends on it: the CPU, its instructions, its cores,
and the GPU a trial gets.

A timing measured on one machine kind says nothing about another: the same 2-core VM name hides
Intel CPUs with and without the bf16 instructions and AMD EPYCs (bf16 autocast is 2x faster
than fp32 on one and slower on another, docs/benchmarks.md), and VMs often report a generic
model name ("Intel Xeon Processor"). So the kind names the instructions that decide a
precision's speed (avx512_bf16, amx_bf16, avx512_fp16) and the core count beside the model.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

# CPU flags that change which precision is fast: bf16 and fp16 instructions, and AMX tiles.
SPEED_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_flags() -> tuple[str, ...]:
    """Which of SPEED_FLAGS this CPU has."""
    found = re.search(r"^flags\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    flags = set(found.group(1).split()) if found else set()
    return tuple(f for f in SPEED_FLAGS if f in flags)


def cpu_model() -> tuple[str, bool]:
    """This machine's CPU model, and whether it has the bf16 instructions (avx512_bf16 or
    amx_bf16) that make bf16 autocast a speed knob on a CPU: without them bf16 is slower than
    fp32 (docs/benchmarks.md)."""
    found = re.search(r"model name\s*:\s*(.+)", _cpuinfo())
    name = found.group(1).strip() if found else (platform.processor() or platform.machine())
    return name, any(f in cpu_flags() for f in BF16_FLAGS)


def gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def machine_kind(cpus_per_trial: int, gpu: str | None) -> str:
    """What decides a timing besides the config: 'AMD EPYC [avx512_bf16] 2 cores | 2 CPUs a
    trial | no GPU'."""
    flags = " ".join(cpu_flags()) or "no bf16/amx"
    return (f"{cpu_model()[0]} [{flags}] {os.cpu_count()} cores | {cpus_per_trial} CPUs a "
            f"trial | {gpu or 'no GPU'}")


def plan_machine_kind(plan) -> str:
    """The machine kind a search's trials run on, from its resource plan
    (trainables/trial/resources.py)."""
    gpu = (gpu_name() or "GPU") if plan.use_gpu else None
    return machine_kind(plan.cpus_per_trial, gpu)


def describe() -> str:
    """The CPU a figure is from, for benchmarks and docs: its model, and its family and model
    numbers where the name is all the VM gives ("AMD EPYC" named a family-25 CPU on one day
    and a family-26 one, whose unet3d baseline trained 53 s where 86 s, on the next)."""
    cpu, _ = cpu_model()
    flags = ", ".join(cpu_flags()) or "no bf16/amx instructions"
    numbers = [re.search(rf"^{key}\s*:\s*(\d+)$", _cpuinfo(), re.MULTILINE)
               for key in ("cpu family", "model")]
    if all(numbers) and not re.search(r"\d", cpu):
        cpu += f" (family {numbers[0].group(1)} model {numbers[1].group(1)})"
    return f"{cpu}, {os.cpu_count()} CPUs, {flags}"
