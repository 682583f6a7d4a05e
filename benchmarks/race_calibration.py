"""How well the race's extrapolation tells a run's time to the target (issue 41): replayed on
whole runs the headline trained to their end, no new training.

    python benchmarks/race_calibration.py [HEADLINE_JSON]

For every run benchmarks/headline.py trained to its end on the plan its confirmation had (the
configurations repeat 1's confirm stage stopped: `cut_retrains`), the race (orchestrator/screen/
race.py) is replayed epoch by epoch against that repeat's baseline curve and target, as the
stopper would have asked it: where it decides, its expected interval is set against the run's
real first epoch at the target. Printed and written beside the input: per run, where the race
would have stopped it and why, whether the real time fell in its interval, and whether a run
it called short of the target reached it after all (a false "short").
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.curves import first_at  # noqa: E402
from orchestrator.evidence import Evidence  # noqa: E402
from orchestrator.screen.race import RaceRule  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def replay(run: dict, baseline_curve: list, target: float) -> dict:
    """The race's first decision on `run` (its curve, its plan), and the truth."""
    rule = RaceRule({"curve": baseline_curve}, target, Evidence())
    planned = int(run["epochs"])
    truth = first_at(run["curve"], target)
    for epoch, score, seconds in run["curve"]:
        decided = rule("run", {"epoch": epoch, "epochs_planned": planned, "val_score": score,
                               "val_epoch": epoch, "train_time_s": seconds})
        if decided is None:
            continue
        low, mid, high, *_ = rule.evidence.expectation("run")
        actual = truth.seconds if truth else math.inf
        return {"at_epoch": int(epoch), "of": planned, "status": str(decided[0]),
                "reason": decided[1], "expected": [low, mid, high], "actual_s": actual,
                "covered": low <= actual <= high,
                "false_short": "short" in decided[1] and truth is not None}
    return {"at_epoch": None, "of": planned, "actual_s": truth.seconds if truth else None}


def main(path: Path) -> None:
    headline = json.loads(path.read_text())
    out = {}
    for workload, r in headline["workloads"].items():
        rows = [replay(run, r["baseline_curve"], r["target"]) | {"knobs": run["knobs"]}
                for run in r.get("cut_retrains", [])]
        judged = [x for x in rows if x.get("at_epoch")]
        out[workload] = {"runs": rows, "judged": len(judged),
                         "covered": sum(x["covered"] for x in judged),
                         "false_short": sum(x["false_short"] for x in judged)}
        print(f"{workload}: {len(judged)} of {len(rows)} runs decided by the race; real time "
              f"in its interval for {out[workload]['covered']}; false 'short': "
              f"{out[workload]['false_short']}")
        for x in rows:
            print(f"  {x['knobs']}: {x.get('status')} at epoch {x['at_epoch']} of {x['of']}: "
                  f"expected {x.get('expected')}, real {x['actual_s']}")
    target = RESULTS / "race_calibration.json"
    target.write_text(json.dumps(out, indent=2, default=str))
    print(f"results: {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "headline.json")
