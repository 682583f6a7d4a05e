"""Strategy 'screen' searches run again against one recorded baseline: their prediction errors
and costs, without the headline's reference and retrains (issue 21: what a change to the screen
does to the predictions, in minutes instead of an hour).

    python benchmarks/screen_repeats.py BASELINE_JSON WORKLOAD [REPEATS]

BASELINE_JSON is a search's `baseline.json` (e.g. a `benchmarks/headline.py --out` folder's
repeat 1). Each repeat runs in a fresh folder (an empty measurements store: a first search),
after the machine is idle.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from headline import FULL_EPOCHS, SPACE  # noqa: E402
from runs import economics, wait_idle  # noqa: E402

from orchestrator import SearchSpec, run_search  # noqa: E402
from orchestrator.resources import init_ray  # noqa: E402


def finite(values) -> list[float]:
    return [abs(v) for v in values if v == v]


def main(baseline: str, workload: str, repeats: int) -> None:
    init_ray()  # one Ray session for every search (each joins it)
    errors, starts, costs = [], [], []
    for i in range(repeats):
        wait_idle()
        out = Path(tempfile.mkdtemp(prefix=f"screen-{workload}-"))
        spec = SearchSpec(name=f"screen-{workload}", workload=workload, space=SPACE,
                          strategy="screen", objective="match_baseline", baseline=baseline,
                          full_epochs=FULL_EPOCHS[workload], num_trials=6, tolerance=0.01,
                          seed=0, output_dir=str(out), tracking_uri=f"sqlite:///{out}/mlflow.db")
        result = run_search(spec)
        costs.append(economics(result)["search_cost_s"])
        t = result.trials
        errors += finite(t.get("prediction_error", []))
        starts += finite(t.get("start_prediction_error", []))
        reached = t[(t["role"] == "trial") & t["time_to_target_s"].notna()]
        print(f"repeat {i + 1}: {costs[-1]:.1f} s; reached "
              f"{reached[[*result.knobs, 'time_to_target_s']].values.tolist()}; errors "
              f"{[round(v, 3) for v in t.get('prediction_error', []) if v == v]}", flush=True)
    if errors:
        start = f"; re-timed at the start {statistics.median(starts):.0%}" if starts else ""
        print(f"{workload}: prediction error {statistics.median(errors):.0%} ({min(errors):.0%}-"
              f"{max(errors):.0%}, n={len(errors)}){start}")
    print(f"{workload}: search cost {statistics.median(costs):.1f} s "
          f"({min(costs):.1f}-{max(costs):.1f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
