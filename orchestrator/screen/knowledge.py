"""What earlier searches measured, kept so a later search of the same question starts from it:
screens, baselines, confirmed results and measured runs.

One JSON-lines file per (model, data digest) under `<output_dir>/measurements/`, appended to
by every screen search, read by the next. The model is a built-in workload's name, a
`module:function` path, or for a Python function its qualified name and a digest of its
parameter shapes (`model_identity`): two models on the same data share nothing.

Every entry names the machine kind it was measured on (orchestrator/machine.py), and the
machine's speed then: the search's clock, the step of its baseline's settings
(orchestrator/history_baseline.py `clock_of`). One machine kind is not one speed: the same
2-core VM kind ran unet3d's steps at 0.52-0.80x the speed of a few hours before (docs/benchmarks.md).
A search holds an earlier baseline to today's speed (its step timed here), and reuses only what
was measured within `DRIFT_NOISE` of that: a timing from a faster day, beside a baseline scaled
to today, would read the drift as a speedup; beside one that is not, it would rank a fresh
measurement against a stale one. An entry without a speed (written before speeds were kept) goes
by the machine kind alone. Reused:
* a screen of the same configuration on this machine kind (not timed again);
* a whole screen of the same candidates and plan on this machine kind (its results as they
  were: a repeated search predicts what the first predicted, and confirms what it confirmed);
* a baseline of the same configuration, length and seed on this machine kind (not trained
  again, unless the spec asks: `rerun_baseline`): so a repeated search has the same target;
* a confirmation that reached this target or a higher one on this machine kind (its time);
* a confirmation that failed or could not reach the target, on this machine kind and for this
  same target only: a miss on another machine, or against another target, is tried again;
* the measured run of the same exported configuration for this target on this machine kind.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import jsonl
from orchestrator.history_baseline import same_speed
from trainables.identity import config_key, run_key

SCREEN, BASELINE, CONFIRM, MEASURED, SEARCH = "screen", "baseline", "confirm", "measured", \
    "search"
WHOLE_SCREEN = "whole_screen"
# The step (seconds) of the search's baseline settings when an entry was measured: its speed;
# and what settings that step is of (history_baseline.clock_settings).
CLOCK, CLOCK_OF = "clock_step_s", "clock_of"


def same_target(a: float, b: float) -> bool:
    return abs(float(a) - float(b)) < 1e-9


def model_identity(spec, base: dict, meta) -> str:
    """The model a search trains, as knowledge keys it: a built-in workload's name; for
    `--model module:function`, that path; for a Python function, its qualified name and a
    digest of its parameter shapes at the search's fixed settings."""
    model = spec.model
    if model is None:
        return spec.workload
    if isinstance(model, str):
        return model
    from trainables.config import TrialConfig

    built = spec.resolved_model()(TrialConfig.from_dict(base), meta)
    shapes = [(name, tuple(p.shape)) for name, p in built.named_parameters()]
    digest = hashlib.sha256(repr(shapes).encode()).hexdigest()[:12]
    return f"{getattr(model, '__module__', '?')}:{getattr(model, '__qualname__', '?')}#{digest}"


@dataclass
class Knowledge:
    """The measurements file of one model and data; `machine` is this search's kind."""

    path: Path
    machine: str
    entries: list[dict] = field(default_factory=list)
    # This search's clock (history_baseline.clock_of) and what it is the step of
    # (clock_settings): None until its baseline is known.
    clock: float | None = None
    clock_of: str | None = None

    @classmethod
    def load(cls, output_dir: str | Path, model: str, digest: str, machine: str) -> Knowledge:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{model}-{digest[:16]}")
        if len(name) > 120:  # a long module path: keep it readable and unique
            name = f"{name[:100]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
        path = Path(output_dir).resolve() / "measurements" / f"{name}.jsonl"
        return cls(path, machine, list(jsonl.read(path)) if path.is_file() else [])

    def searches(self) -> list[str]:
        """The earlier searches this file holds measurements of."""
        return [e["folder"] for e in self.entries if e["kind"] == SEARCH]

    def _here(self, kind: str) -> list[dict]:
        """Entries of `kind` measured on this machine kind, at this search's speed."""
        return [e for e in self.entries if e["kind"] == kind and e["machine"] == self.machine
                and self._at_this_speed(e)]

    def _at_this_speed(self, entry: dict) -> bool:
        """Measured at this search's speed, or no telling (no clock either side, or the step
        of other settings: the machine kind decides, as before speeds were kept)."""
        return entry.get(CLOCK_OF) != self.clock_of or same_speed(entry.get(CLOCK), self.clock)

    def elsewhen(self) -> int:
        """Entries of this machine kind measured at another speed than this search's (not
        reused: measured again)."""
        return sum(1 for e in self.entries if e["kind"] != SEARCH and
                   e["machine"] == self.machine and not self._at_this_speed(e))

    def screened(self, config: dict[str, Any]) -> dict | None:
        """An earlier screen of `config` on this machine kind (the latest)."""
        key = config_key(config)
        found = [e["result"] for e in self._here(SCREEN) if config_key(e["result"]["config"]) == key]
        return found[-1] if found else None

    def whole_screen(self, plan: str) -> dict | None:
        """An earlier screen of the same candidates and plan on this machine kind (the latest):
        its results and the loop-alone result. Per-configuration screens alone do not replay a
        screen: a contender's entry holds its re-timed rounds, so a ranking of them picks other
        contenders and switch variants than the first search did."""
        found = [e for e in self._here(WHOLE_SCREEN) if e["plan"] == plan]
        return found[-1] if found else None

    def baseline(self, config: dict[str, Any]) -> dict | None:
        """The latest baseline record of `config` (its length and seed included) here."""
        key = config_key(config)
        found = [e["record"] for e in self._here(BASELINE) if config_key(e["config"]) == key]
        return found[-1] if found else None

    def measured(self, config: dict[str, Any], target: float) -> dict | None:
        """The latest measured run of the exported `config` for `target` here."""
        key = config_key(config)
        found = [e["measurement"] for e in self._here(MEASURED)
                 if config_key(e["config"]) == key and same_target(e["target"], target)]
        return found[-1] if found else None

    def confirmed(self, config: dict[str, Any], target: float,
                  besides: str | None = None) -> dict | None:
        """An earlier confirmation on this machine kind that settles `config` for `target`:
        it reached this target or a higher one (its time is reused), or it failed or could not
        reach this same target (not retried here). A confirmation of the same run at other
        speed switches (`run_key`: a screen variant, or the profile's pick) settles it too when
        what it measured is the run's, not its switches': it reached the target, or learned
        too little (`short_by`). `besides`: a search id whose own confirmations do not count
        (a resumed search's are rows of its journal already)."""
        key, run = config_key(config), run_key(config)
        for e in reversed(self._here(CONFIRM)):
            if besides is not None and e.get("search_id", e.get("search")) == besides:
                continue
            same = config_key(e["config"]) == key
            if not same and run_key(e["config"]) != run:
                continue
            reached = e.get("time_to_target_s") is not None or e.get("expected_s") is not None
            if reached and e["target"] >= target:  # measured, or (a race) told by its curve
                return e
            learned = same or e.get("short_by") is not None  # a speed cut is its switches'
            if not reached and learned and same_target(e["target"], target):
                return e
        return None

    def add(self, kind: str, **entry: Any) -> None:
        line = {"kind": kind, "machine": self.machine, **entry}
        if self.clock is not None:
            line[CLOCK], line[CLOCK_OF] = self.clock, self.clock_of
        self.entries.append(line)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        jsonl.append(self.path, line, default=str)

    def summary(self) -> str | None:
        """The header's line on what earlier searches this one starts from."""
        earlier = self.searches()
        if not earlier:
            return None
        screens, confirms = len(self._here(SCREEN)), len(self._here(CONFIRM))
        return (f"learning from {len(earlier)} earlier search(es) of this model and data "
                f"({self.path}): {screens} screens and {confirms} confirmations on this "
                "machine kind")
