"""SearchSpec: everything one search needs, validated on construction.

The CLI flags, a YAML/JSON spec file and the Python API all build this one dataclass, so they
accept exactly the same options and fail with the same messages.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.objective import OBJECTIVES, make_objective
from trainables.config import TrialConfig

PLACEMENTS = ("PACK", "SPREAD")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(kw_only=True)
class SearchSpec:
    name: str = "default"
    """Search name: the MLflow experiment and the folder under `output_dir`."""
    data: str | None = None
    """Path to an .npz (`x`, `y`, optional `x_val`, `y_val`); None uses the built-in synthetic set."""
    space: str | dict | Any = "default"
    """A registered space name, 'module:function', a written dict, or a function (API only)."""
    base: dict[str, Any] = field(default_factory=dict)
    """Fixed trial settings (TrialConfig fields) that the space does not search."""
    epochs: int = 3
    """Epochs per trial (a shortcut for base['epochs'])."""
    num_trials: int = 8
    """Trials to run (the search may stop earlier on `time_budget_s`)."""
    time_budget_s: float | None = None
    """Wall-clock budget of the whole search; running trials are stopped when it runs out."""
    objective: str = "weighted"
    """'weighted' or 'time_to_target' (formulas in orchestrator/objective.py and the README)."""
    time_weight: float = 0.05
    """Weighted objective: accuracy lost per doubling of training time."""
    reference_time_s: float = 10.0
    """Weighted objective: the time at which the time penalty is zero."""
    target: float | None = None
    """time_to_target objective: the validation accuracy to reach."""
    seed: int = 0
    """Seeds the sampler and every trial."""
    cpus_per_trial: int | None = None
    """CPUs one trial's workers share; default: all CPUs of one machine (locally: all of them;
    on a cluster: one node's; with GPUs: the CPUs beside the trial's GPUs). Fair timing."""
    max_concurrent_trials: int | None = None
    """Trials at once; default: as many as fit without sharing cores or GPUs."""
    output_dir: str = "orchestrator_runs"
    """Where Ray's trial folders, the leaderboard and the best config are written."""
    tracking_uri: str | None = None
    """MLflow tracking URI; default: a SQLite file `mlflow.db` in the working directory."""
    placement: str = "PACK"
    """Where a trial's workers go on a multi-node cluster: 'PACK' (as few nodes as possible:
    fast collectives) or 'SPREAD' (across nodes: more memory bandwidth, survives one node)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"name {self.name!r} must be 1-100 letters, digits, '_', '.' or '-'")
        if self.data is not None and not Path(self.data).is_file():
            raise ValueError(f"data file {self.data} does not exist")
        for key, value, lowest in (("epochs", self.epochs, 1), ("num_trials", self.num_trials, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise ValueError(f"{key} must be an integer >= {lowest} (got {value!r})")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ValueError(f"time_budget_s must be > 0 seconds (got {self.time_budget_s})")
        for key in ("cpus_per_trial", "max_concurrent_trials"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{key} must be an integer >= 1 (got {value!r})")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {list(PLACEMENTS)} "
                             f"(got {self.placement!r})")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {list(OBJECTIVES)} (got {self.objective!r})")
        self.make_objective()  # validates weight / target
        if not isinstance(self.base, dict):
            raise ValueError("base must be a mapping of trial setting -> value")
        TrialConfig.from_dict(self.trial_base())  # unknown or invalid fixed settings fail now

    def trial_base(self) -> dict[str, Any]:
        return {"epochs": self.epochs, "seed": self.seed, **self.base}

    def make_objective(self):
        return make_objective(self.objective, time_weight=self.time_weight,
                              reference_time_s=self.reference_time_s, target=self.target)

    def resolved_tracking_uri(self) -> str:
        return self.tracking_uri or f"sqlite:///{Path.cwd() / 'mlflow.db'}"

    def resolved_artifact_root(self) -> Path | None:
        """Where run artifacts go: beside a SQLite store's file (`mlartifacts/`); None lets a
        tracking server choose. Never the working directory of a `ray job submit` job, which
        Ray deletes after the job."""
        uri = self.resolved_tracking_uri()
        if uri.startswith("sqlite:///"):
            return Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts"
        return None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not isinstance(self.space, (str, dict)):
            out["space"] = f"{getattr(self.space, '__module__', '?')}:" \
                           f"{getattr(self.space, '__qualname__', repr(self.space))}"
        return out

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SearchSpec:
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"unknown spec option(s) {unknown}; known: {cls.field_names()}")
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> SearchSpec:
        """Load a YAML or JSON spec with yaml.safe_load: plain data only, no object tags."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"spec file {path} does not exist")
        try:
            raw = yaml.safe_load(path.read_text()) if path.suffix != ".json" \
                else json.loads(path.read_text())
        except (yaml.YAMLError, json.JSONDecodeError) as err:
            first = str(err).splitlines()[0]
            raise ValueError(f"spec file {path} is malformed: {first}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"spec file {path} must hold a mapping of option -> value")
        return cls.from_dict({**raw, **overrides})
