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

`--decide-at F ...` replays the same runs with the race deciding by each fraction F of a
contender's schedule (race.DECIDE_AT): how often the interval holds the real time, how far the
expected time is from it, and whether the chance to reach still tells the runs that missed from
those that reached. What the race spends on each contender is that fraction of its plan.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.curves import first_at  # noqa: E402
from orchestrator.evidence import Evidence  # noqa: E402
from orchestrator.screen import race  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def replay(run: dict, baseline_curve: list, target: float, decide_at: float) -> dict:
    """The race's first decision on `run` (its curve, its plan), and the truth."""
    rule = race.RaceRule({"curve": baseline_curve}, target, Evidence(), decide_at)
    planned = int(run["epochs"])
    truth = first_at(run["curve"], target)
    for epoch, score, seconds in run["curve"]:
        decided = rule("run", {"epoch": epoch, "epochs_planned": planned, "val_score": score,
                               "val_epoch": epoch, "train_time_s": seconds})
        if decided is None:
            continue
        low, mid, high, _, reach, _ = rule.evidence.expectation("run")
        actual = truth.seconds if truth else math.inf
        return {"at_epoch": int(epoch), "of": planned, "status": str(decided[0]),
                "reason": decided[1], "expected": [low, mid, high], "reach": reach,
                "actual_s": actual,
                "covered": low <= actual <= high,
                "false_short": "short" in decided[1] and truth is not None}
    return {"at_epoch": None, "of": planned, "actual_s": truth.seconds if truth else None}


def replays(headline: dict, decide_at: float = race.DECIDE_AT) -> dict:
    """Every workload's runs replayed with the race deciding by `decide_at` of a schedule."""
    out = {}
    for workload, r in headline["workloads"].items():
        rows = [replay(run, r["baseline_curve"], r["target"], decide_at) | {"knobs": run["knobs"]}
                for run in r.get("cut_retrains", [])]
        judged = [x for x in rows if x.get("at_epoch")]
        out[workload] = {"runs": rows, "judged": len(judged),
                         "covered": sum(x["covered"] for x in judged),
                         "false_short": sum(x["false_short"] for x in judged)}
    return out


def summary(out: dict) -> dict:
    """Over all workloads' decided runs: the interval's coverage, the expected time's error on
    the runs that reached, and the chance to reach of the runs that reached and that missed."""
    judged = [x for w in out.values() for x in w["runs"] if x.get("at_epoch")]
    reached = [x for x in judged if math.isfinite(x["actual_s"])]
    errors = [abs(x["expected"][1] - x["actual_s"]) / x["actual_s"] for x in reached
              if math.isfinite(x["expected"][1])]
    return {"judged": len(judged), "covered": sum(x["covered"] for x in judged),
            "median_error": statistics.median(errors) if errors else None,
            "reach_of_reached": sorted(round(x["reach"], 2) for x in reached),
            "reach_of_missed": sorted(round(x["reach"], 2) for x in judged
                                      if not math.isfinite(x["actual_s"])),
            "fraction_of_plan": statistics.median(x["at_epoch"] / x["of"] for x in judged)
            if judged else None}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("headline", nargs="?", default=str(RESULTS / "headline.json"))
    ap.add_argument("--decide-at", nargs="+", type=float, default=[],
                    help="also replay with the race deciding by these fractions of a schedule "
                         "(of the share it reads: race.horizon, the whole schedule where the "
                         "baseline reached the target halfway or later)")
    args = ap.parse_args(argv)
    path = Path(args.headline)
    headline = json.loads(path.read_text())
    out = replays(headline)
    for workload in out:
        rows = out[workload]["runs"]
        print(f"{workload}: {out[workload]['judged']} of {len(rows)} runs decided by the race; "
              f"real time "
              f"in its interval for {out[workload]['covered']}; false 'short': "
              f"{out[workload]['false_short']}")
        for x in rows:
            print(f"  {x['knobs']}: {x.get('status')} at epoch {x['at_epoch']} of {x['of']}: "
                  f"expected {x.get('expected')}, real {x['actual_s']}")
    sweep = {str(f): summary(replays(headline, f)) for f in args.decide_at}
    for fraction, found in sweep.items():
        print(f"deciding by {float(fraction):.0%} of a schedule: {found}")
    out["decide_at"] = {"chosen": race.DECIDE_AT, "now": summary(out), "sweep": sweep}
    target = path.parent / "race_calibration.json"
    target.write_text(json.dumps(out, indent=2, default=str))
    print(f"results: {target}")


if __name__ == "__main__":
    main()
