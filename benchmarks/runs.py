"""What the benchmarks share: an idle machine before each run, a median with its spread, a
search's economics as the product wrote them, and a configuration trained again to its end.

Every figure a benchmark reports about a search comes from the search folder's
`economics.json` (orchestrator/economics.py): one definition, for the product and for the
benchmarks alike.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import train_config  # noqa: E402
from orchestrator.curves import first_at  # noqa: E402
from orchestrator.records import Role, read_journal  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def wait_idle(timeout_s: float = 120.0) -> None:
    """Wait until the previous run's actors are gone (every resource free again)."""
    import ray

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0):
            return
        time.sleep(0.5)


def spread(values: list[float | None]) -> dict:
    """The median, the extremes and the count of the finite values (all of them kept)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return {"median": None, "min": None, "max": None, "n": 0, "values": values}
    return {"median": statistics.median(finite), "min": min(finite), "max": max(finite),
            "n": len(finite), "values": values}


def economics(result) -> dict:
    """A search's economics.json (what it printed, what MLflow holds)."""
    return json.loads((Path(result.output_dir) / "economics.json").read_text())


def trials(result) -> list:
    """The search's own trial records (its journal), in the order they started."""
    finished, _ = read_journal(Path(result.output_dir) / "trials.jsonl")
    return sorted((r for r in finished.values() if r.role == Role.TRIAL),
                  key=lambda r: r.started)


def train_to_end(config: dict, target: float, name: str, seed: int, root: Path,
                 uri: str, data: str | None = None) -> dict:
    """Train `config` (a full trial config) once with `seed`, to its end, as `orchestrator
    train` does: its whole training time, and whether (and when) it reached `target`."""
    wait_idle()
    path = root / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": name, "data": data, "config": {**config, "seed": seed}}))
    result = train_config(path, name=name, output_dir=str(root / "runs"), tracking_uri=uri)
    (run,) = trials(result)
    reached = first_at(run.curve, target)
    return {"seed": seed, "epochs": run.epochs, "train_time_s": run.metrics["train_time_s"],
            "curve": run.curve, "reached": reached is not None,
            "time_to_target_s": reached.seconds if reached else None,
            "best_score": max((s for _, s, _ in run.curve), default=None)}


def whole_run_speedup(baseline_s: float, runs: list[dict]) -> float | None:
    """The baseline's run over the median whole run of `runs`, one that missed the target
    counting as never done (infinitely slow): None where most missed."""
    if not runs:
        return None
    median = statistics.median([r["train_time_s"] if r["reached"] else math.inf for r in runs])
    return baseline_s / median if math.isfinite(median) else None


def machine() -> str:
    from orchestrator.machine import describe

    return describe()
