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

`--searches DIR ...` replays instead the race's own contenders in the search folders
benchmarks/long_jobs.py wrote (its `--out`): each contender whose configuration (at any length)
a measured run of the same search trained to its end, against that search's baseline and
target; the measured run tells whether it reached the target. Printed per workload and length:
the baseline's noise (race.noise), how the contenders were decided, and their chance to reach
against the truth (Brier score; those cut as short that reached, and those that missed).

`--decide-at F ...` replays the same runs with the race deciding by each fraction F of a
contender's schedule (race.DECIDE_AT): how often the interval holds the real time, how far the
expected time is from it, and whether the chance to reach still tells the runs that missed from
those that reached. What the race spends on each contender is that fraction of its plan. With
`--searches`, a contender's curve ends where its race stopped it, unless the measure stage
trained its very run (same settings, seed and plan) to its end: then it reads on there
(`trained_on`). A fraction later than what is known of a contender leaves it undecided
(counted apart).
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
from orchestrator.records import Role, read_journal  # noqa: E402
from orchestrator.screen import race  # noqa: E402
from trainables.identity import LENGTH, key_without, run_key, run_of  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def decide(run: dict, baseline_curve: list, target: float, decide_at: float) -> dict | None:
    """The race's first decision on `run` (its curve, its plan; `last_epoch`, where it was
    stopped after its last validation): where, why, and what it expected; None if it never
    decided."""
    rule = race.RaceRule({"curve": baseline_curve}, target, Evidence(), decide_at)
    planned = int(run["epochs"])
    for report in reports(run["curve"], run.get("last_epoch")):
        decided = rule("run", report | {"epochs_planned": planned})
        if decided is not None:
            low, mid, high, _, reach, _ = rule.evidence.expectation("run")
            return {"at_epoch": int(report["epoch"]), "of": planned,
                    "status": str(decided[0]), "reason": decided[1],
                    "expected": [low, mid, high], "reach": reach}
    return None


def replay(run: dict, baseline_curve: list, target: float, decide_at: float) -> dict:
    """The race's first decision on a run trained to its end, against the truth: its real
    first time at the target."""
    truth = first_at(run["curve"], target)
    actual = truth.seconds if truth else math.inf
    found = decide(run, baseline_curve, target, decide_at)
    if found is None:
        return {"at_epoch": None, "of": int(run["epochs"]),
                "actual_s": truth.seconds if truth else None}
    low, _, high = found["expected"]
    return found | {"actual_s": actual, "covered": low <= actual <= high,
                    "false_short": "short" in found["reason"] and truth is not None}


def reports(curve: list, last_epoch: int | None = None) -> list[dict]:
    """What the stopper heard of a run: a report per validated epoch, and one at `last_epoch`
    (training time at the pace between its first and last validations) where it was stopped
    after its last validation (the race decides at an epoch it did not validate)."""
    out = [{"epoch": e, "val_score": s, "val_epoch": e, "train_time_s": t} for e, s, t in curve]
    if last_epoch is not None and curve and last_epoch > curve[-1][0]:
        out.append({"epoch": last_epoch, "train_time_s": at_pace(curve, last_epoch)})
    return out


def at_pace(curve: list, epoch: int) -> float:
    """The training time at `epoch`, past the curve's last point, at its pace between its first
    and last validations."""
    (e0, _, t0), (e1, _, t1) = curve[0], curve[-1]
    pace = (t1 - t0) / (e1 - e0) if e1 > e0 else t1 / e1
    return t1 + pace * (epoch - e1)


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


def _same(knobs: dict) -> str:
    """A contender's configuration at any length, speed switches aside."""
    return key_without(run_of(knobs), {LENGTH})


def searched(root: Path) -> dict:
    """The race's contenders in the search folders under `root` whose configuration a measured
    run of the same search trained to its end, each with its search's baseline curve, target and
    the truth; per "workload length"."""
    out: dict[str, list] = {}
    for journal in sorted(root.rglob("trials.jsonl")):
        folder = journal.parent
        if not (folder / "baseline.json").exists() or not (folder / "measured.json").exists():
            continue
        baseline = json.loads((folder / "baseline.json").read_text())
        target = json.loads((folder / "measured.json").read_text())["target"]
        records = [(r, _same(r.knobs)) for r in read_journal(journal)[0].values()]
        truth: dict[str, bool] = {}
        whole: dict[str, list] = {}  # run_key (its plan included) -> a measured run's curve
        for r, key in records:
            if r.role == Role.MEASURED:
                truth[key] = truth.get(key, False) or first_at(r.curve, target) is not None
                whole[run_key(r.knobs)] = r.curve
        name = f"{baseline['config']['workload']} {baseline['epochs']}"
        noise = race.noise(baseline["curve"])
        for r, key in records:
            if r.role == Role.TRIAL and r.curve and key in truth:
                out.setdefault(name, []).append({
                    "run": trained_on(r, whole.get(run_key(r.knobs))),
                    "baseline_curve": baseline["curve"], "target": target,
                    "knobs": r.knobs, "reached": truth[key], "search": str(folder),
                    "noise": noise})
    return out


def decided(contenders: list[dict], decide_at: float) -> list[dict]:
    """`contenders` (`searched`), each with the race's decision on it deciding by `decide_at`."""
    return [(decide(c["run"], c["baseline_curve"], c["target"], decide_at) or {}) |
            {k: c[k] for k in ("knobs", "reached", "search", "noise")} |
            {"trained_on": c["run"]["trained_on"]} for c in contenders]


def trained_on(rec, measured: list | None) -> dict:
    """A contender's run as the replay reads it: its race's curve, and where the measure stage
    trained its very run (the same settings, seed and plan: the same weights epoch for epoch) to
    its end, that run's later validations too, on the contender's own pace; so a fraction later
    than where its race stopped it can be replayed."""
    planned = rec.knobs.get(LENGTH) or rec.epochs
    curve, last = [list(p) for p in rec.curve], rec.epochs
    later = [p for p in measured or [] if p[0] > last]
    if later and len(curve) > 1:
        curve += [[e, score, at_pace(rec.curve, e)] for e, score, _ in later]
        last = int(planned)
    return {"curve": curve, "epochs": planned, "last_epoch": last, "trained_on": bool(later)}


def told(rows: list[dict]) -> dict:
    """How the replayed contenders' chance to reach the target told the truth."""
    judged = [x for x in rows if x.get("at_epoch")]
    short = [x for x in judged if "short" in x["reason"]]
    return {"contenders": len(rows), "judged": len(judged), "noise": rows[0]["noise"],
            "brier": statistics.mean((x["reach"] - x["reached"]) ** 2 for x in judged)
            if judged else None,
            "reach_of_reached": sorted(round(x["reach"], 2) for x in judged if x["reached"]),
            "reach_of_missed": sorted(round(x["reach"], 2) for x in judged if not x["reached"]),
            "cut_short_reached": sum(x["reached"] for x in short),
            "cut_short_missed": sum(not x["reached"] for x in short),
            "trained_on": sum(bool(x.get("trained_on")) for x in rows),
            # what the race spends on each: this share of its plan, the median
            "fraction_of_plan": statistics.median(x["at_epoch"] / x["of"] for x in judged)
            if judged else None}


def main_searches(roots: list[str], fractions: list[float]) -> None:
    contenders: dict[str, list] = {}  # read once, replayed at every fraction
    for root in roots:
        for name, rows in searched(Path(root)).items():
            contenders.setdefault(name, []).extend(rows)

    def told_at(decide_at: float) -> dict:
        return {name: told(decided(rows, decide_at)) for name, rows in sorted(contenders.items())}

    found = told_at(race.DECIDE_AT)
    sweep = {str(f): told_at(f) for f in fractions}
    for fraction, by_name in [(race.DECIDE_AT, found), *((float(f), t) for f, t in sweep.items())]:
        print(f"deciding by {fraction:.0%} of a schedule:")
        for name, t in by_name.items():
            brier = "-" if t["brier"] is None else f"{t['brier']:.3f}"
            print(f"  {name}: noise {t['noise']:.3f}; {t['judged']} of {t['contenders']} "
                  f"contenders judged ({t['trained_on']} read on past their race); "
                  f"Brier {brier}; chance to reach of those that reached "
                  f"{t['reach_of_reached']}, that missed {t['reach_of_missed']}; cut as short: "
                  f"{t['cut_short_missed']} that missed, {t['cut_short_reached']} that reached; "
                  f"decided at {t['fraction_of_plan'] or 0:.0%} of a plan (median)")
    target = RESULTS / "race_searches.json"
    target.write_text(json.dumps({"searches": roots, "told": found, "decide_at": {
        "chosen": race.DECIDE_AT, "sweep": sweep}}, indent=2, default=str))
    print(f"results: {target}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("headline", nargs="?", default=str(RESULTS / "headline.json"))
    ap.add_argument("--decide-at", nargs="+", type=float, default=[],
                    help="also replay with the race deciding by these fractions of a schedule "
                         "(of the share it reads: race.horizon, the whole schedule where the "
                         "baseline reached the target halfway or later)")
    ap.add_argument("--searches", nargs="+", default=None,
                    help="replay the race's contenders in these long_jobs.py --out folders")
    args = ap.parse_args(argv)
    if args.searches:
        return main_searches(args.searches, args.decide_at)
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
