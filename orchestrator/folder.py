"""A search's output folder: one object that owns every file name in it.

    OUTPUT_DIR/NAME/
      search_state.json    the spec, where MLflow is, the stages done; `finished` at the end
      trials.jsonl         a line when each trial starts and when it ends (the resume journal)
      baseline.json        the baseline's config and result, once its stage is done
      screen.json, predictions.json   strategy 'screen': timings and predicted times
      measured.json        the answer trained as it is handed over (orchestrator/measure.py)
      mlflow-outbox.jsonl  every tracking step, so a driver death loses no MLflow record
      leaderboard.csv, pareto.csv, pareto.png, best_config.json   the results
      economics.json       the speedup, its cost and its payback (orchestrator/economics.py)
      error.log            the full traceback of a stage that failed
      ray/                 Ray's own files: Tune's experiment state and per-trial folders
                           (run_trial_*/result.json), Ray Train's checkpoints (ray/train/)

Everything a resume reads here is JSON: nothing in a search folder is unpickled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SearchFolder:
    root: Path

    @classmethod
    def of(cls, output_dir: str | Path, name: str) -> SearchFolder:
        return cls((Path(output_dir) / name).resolve())

    @property
    def state(self) -> Path:
        return self.root / "search_state.json"

    @property
    def journal(self) -> Path:
        return self.root / "trials.jsonl"

    @property
    def outbox(self) -> Path:
        return self.root / "mlflow-outbox.jsonl"

    @property
    def leaderboard(self) -> Path:
        return self.root / "leaderboard.csv"

    @property
    def pareto_csv(self) -> Path:
        return self.root / "pareto.csv"

    @property
    def pareto_png(self) -> Path:
        return self.root / "pareto.png"

    @property
    def best_config(self) -> Path:
        return self.root / "best_config.json"

    @property
    def baseline(self) -> Path:
        return self.root / "baseline.json"

    @property
    def screen(self) -> Path:
        return self.root / "screen.json"

    @property
    def predictions(self) -> Path:
        return self.root / "predictions.json"

    @property
    def measured(self) -> Path:
        return self.root / "measured.json"

    @property
    def economics(self) -> Path:
        return self.root / "economics.json"

    @property
    def ray(self) -> Path:
        """Ray Tune's and Ray Train's own files: none of them is read back by a resume."""
        return self.root / "ray"

    @property
    def error_log(self) -> Path:
        return self.root / "error.log"

    @property
    def train_storage(self) -> Path:
        """Ray Train's storage for worker-group trials (checkpoints)."""
        return self.ray / "train"

    def read_state(self) -> dict[str, Any]:
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def write_state(self, **changes: Any) -> None:
        """Update search_state.json (write to a temp file, then rename: never half-written)."""
        state = {**self.read_state(), **changes}
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, default=str))
        tmp.replace(self.state)

    def stages_done(self) -> list[str]:
        return list(self.read_state().get("stages_done", []))

    def mark_done(self, stage: str, seconds: float) -> None:
        """Record that `stage` finished (a resume does not run it again) and its wall time."""
        state = self.read_state()
        self.write_state(stages_done=[*state.get("stages_done", []), stage],
                         stage_s={**state.get("stage_s", {}), stage: round(seconds, 3)})

    def start_fresh(self) -> None:
        """A new search under a used name: the old journal, outbox and baseline are not its
        history."""
        self.root.mkdir(parents=True, exist_ok=True)
        for path in (self.journal, self.outbox, self.state, self.baseline, self.error_log,
                     self.screen, self.predictions, self.measured, self.economics):
            path.unlink(missing_ok=True)


# Spec options that may name a file: stored absolute, so a resume works from any directory.
_PATH_OPTIONS = ("data", "space", "warm_start")


def portable_spec(spec: dict[str, Any], output_dir: Path) -> dict[str, Any]:
    """The spec as search_state.json keeps it: relative file paths made absolute, and the output
    folder's parent as output_dir."""
    out = {**spec, "output_dir": str(output_dir)}
    for key in _PATH_OPTIONS:
        value = out.get(key)
        if isinstance(value, str) and Path(value).exists():
            out[key] = str(Path(value).resolve())
    return out
