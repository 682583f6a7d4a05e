"""What earlier searches measured, kept so a later search on the same workload and data starts
from it: screens, baselines (their curves and noise scales) and confirmed results.

One JSON-lines file per (workload, data digest) under `<output_dir>/measurements/`, appended to
by every search that screens and confirms, read by the next: a configuration screened on the
same machine kind is not timed again, a configuration confirmed against the same target is not
trained again, and one that failed or could not reach a target is never retried for that
target or a higher one. Timings are only reused on the machine kind they were measured on
(`machine_kind`): a screen on another GPU says nothing about this one.
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import jsonl
from trainables.config import training_of
from trainables.status import traits

SCREEN, CONFIRM, SEARCH = "screen", "confirm", "search"


def cpu_model() -> tuple[str, bool]:
    """This machine's CPU model, and whether it has the bf16 instructions (avx512_bf16 or
    amx_bf16) that make bf16 autocast a speed knob on a CPU: without them bf16 is slower than
    fp32 (docs/benchmarks.md)."""
    cpu = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return cpu, False
    found = re.search(r"model name\s*:\s*(.+)", text)
    return (found.group(1).strip() if found else cpu), bool(re.search(r"\b(avx512|amx)_bf16\b",
                                                                       text))


def machine_kind(cpus_per_trial: int, gpu_name: str | None) -> str:
    """What decides a timing besides the config: the CPU model, the trial's cores, the GPU."""
    return f"{cpu_model()[0]} | {cpus_per_trial} CPUs | {gpu_name or 'no GPU'}"


def config_key(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


@dataclass
class Knowledge:
    """The measurements file of one workload and data; `machine` is this search's kind."""

    path: Path
    machine: str
    entries: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, output_dir: str | Path, workload: str, digest: str, machine: str) -> Knowledge:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{workload}-{digest[:16]}")
        path = Path(output_dir).resolve() / "measurements" / f"{name}.jsonl"
        return cls(path, machine, list(jsonl.read(path)) if path.is_file() else [])

    def searches(self) -> list[str]:
        """The earlier searches this file holds measurements of."""
        return [e["folder"] for e in self.entries if e["kind"] == SEARCH]

    def screened(self, config: dict[str, Any]) -> dict | None:
        """An earlier screen of `config` on this machine kind (the latest)."""
        key = config_key(config)
        found = [e["result"] for e in self.entries if e["kind"] == SCREEN
                 and e["machine"] == self.machine and config_key(e["result"]["config"]) == key]
        return found[-1] if found else None

    def confirmed(self, config: dict[str, Any], target: float,
                  besides: str | None = None) -> dict | None:
        """An earlier confirmation that settles `config` for `target`: it reached this target
        or a higher one on this machine kind (its time is reused), or it failed, or could not
        reach this target or a lower one (never retried). A confirmation of the same run at
        other speed switches (`training_of`: a screen variant, or the profile's pick) settles it
        too when what it measured is the run's, not its switches': it reached the target, or
        learned too little (`short_by`). `besides`: a search folder whose own confirmations do
        not count (a resumed search's are rows of its journal already)."""
        key, run = config_key(config), config_key(training_of(config))
        for e in reversed(self.entries):
            if e["kind"] != CONFIRM or (besides is not None and e.get("search") == besides):
                continue
            same = config_key(e["config"]) == key
            if not same and config_key(training_of(e["config"])) != run:
                continue
            reached = e.get("time_to_target_s") is not None
            if reached and e["target"] >= target and e["machine"] == self.machine:
                return e
            learned = same or e.get("short_by") is not None  # a speed cut is its switches'
            if not reached and learned and (traits(e["status"]).failed or e["target"] <= target):
                return e
        return None

    def add(self, kind: str, **entry: Any) -> None:
        line = {"kind": kind, "machine": self.machine, **entry}
        self.entries.append(line)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        jsonl.append(self.path, line, default=str)
