"""The headline: how much faster the configuration a search finds reaches the baseline's accuracy,
what finding it cost, and whether that holds when everything is run again (issue 21).

    python benchmarks/headline.py --quick          # classifier, 1 repeat, small: a smoke run
    python benchmarks/headline.py                  # classifier and unet3d, 3 repeats (~1 h)

Per workload, on the built-in synthetic data, every run through the product's own API:
 1. `--repeats` times: a strategy 'screen' search (`orchestrator search --strategy screen
    --objective match_baseline --full-epochs N`): its seeds baseline trains N epochs (a fixed
    length: S is its score at epoch N, not a patience rule), then screen, predict, confirm.
    Each repeat starts from an empty measurements store, so its cost is a first search's.
 2. A second search right after repeat 1, in its folder (so it learns from repeat 1's
    measurements) and compared with repeat 1's baseline (`--baseline PATH`): its cost. Then one
    with twice the budget (`--trials` is the question's: it confirms what the first's left).
 3. The reference: today's 16-trial strategy 'tune' match_baseline search (Optuna proposes,
    trials planned for `--max-epochs` and stopped once decided), against repeat 1's baseline.
 4. The configuration each of the two found is trained again from scratch `--retrains` times
    to S - tolerance (`orchestrator train`, a time_to_target run): the speedups are the median
    baseline run (its N epochs, the run the user makes) over the median of these times, a
    retrain that never reached the target counting as infinitely slow.
Cost is a search's wall time with the baseline's own run excluded, divided by the baseline's
training time (its N epochs); payback is that cost over the time saved per run. Everything is
printed side by side and written to `benchmarks/results/headline.json` (`--results` elsewhere).
Before each run the script waits until every CPU of the previous run is free again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import SearchSpec, run_search, train_config  # noqa: E402

SPACE = "compact"  # search_spaces/default.compact_space: the knobs the seeds name first
FULL_EPOCHS = {"classifier": 15, "unet3d": 16}
RESULTS = Path(__file__).resolve().parent / "results" / "headline.json"


def machine() -> str:
    """The CPU the figures are from, and whether it has the bf16 instructions."""
    from orchestrator.knowledge import cpu_model

    cpu, bf16 = cpu_model()
    return f"{cpu}, {os.cpu_count()} CPUs, {'with' if bf16 else 'without'} avx512_bf16/amx_bf16"


def wait_idle(timeout_s: float = 120.0) -> None:
    """Wait until the previous run's actors are gone (every resource free again)."""
    import ray

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0):
            return
        time.sleep(0.5)


def spread(values: list[float]) -> dict:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return {"median": None, "min": None, "max": None, "n": 0, "values": values}
    return {"median": statistics.median(finite), "min": min(finite), "max": max(finite),
            "n": len(finite), "values": values}


def screen_search(workload: str, args, folder: Path, name: str, baseline: str = "seeds",
                  confirm: int | None = None):
    wait_idle()
    spec = SearchSpec(name=name, workload=workload, space=SPACE,
                      strategy="screen", objective="match_baseline", baseline=baseline,
                      full_epochs=args.full_epochs[workload],
                      num_trials=confirm or args.confirm,
                      tolerance=args.tolerance, seed=args.seed, output_dir=str(folder),
                      tracking_uri=args.uri)
    result = run_search(spec)
    return result, stage_seconds(folder / name)


def stage_seconds(search_dir: Path) -> dict:
    """Each stage's seconds, as the search folder recorded them."""
    return json.loads((search_dir / "search_state.json").read_text()).get("stage_s", {})


def search_cost_s(stage_s: dict) -> float:
    """The search's seconds, the baseline's own run excluded (a run the user makes anyway)."""
    return sum(s for stage, s in stage_s.items() if stage != "baseline")


def economics(result, stage_s: dict, baseline: dict) -> dict:
    """What one search cost, and what its own best trial measured (before any retraining)."""
    cost = search_cost_s(stage_s)
    time_to_s = baseline["train_time_s"]  # the whole fixed-length run: what the user runs
    best = result.best or {}
    found_s = best.get("time_to_target_s")
    errors = [abs(v) for v in result.trials.get("prediction_error", []) if v == v]
    started = [abs(v) for v in result.trials.get("start_prediction_error", []) if v == v]
    out = {"search_cost_s": cost, "baseline_time_s": time_to_s, "S": baseline["val_score"],
           "search_cost_baseline_runs": cost / time_to_s,
           "found": {k: best.get(k) for k in result.knobs} if best else None,
           "found_time_s": found_s, "prediction_errors": errors,
           "start_prediction_errors": started,
           "trials": len(result.trials[result.trials["role"] == "trial"])}
    if found_s and found_s == found_s and found_s < time_to_s:
        out["payback_runs"] = cost / (time_to_s - found_s)
    return out


def speedup_of(baseline_s: float, times: list[float]) -> float | None:
    """The baseline's run over the median time to the target of the retrains, a retrain that
    never reached the target counting as never (infinite): None when most did not."""
    if not times:
        return None
    median = statistics.median([t if t == t else math.inf for t in times])
    return baseline_s / median if math.isfinite(median) else None


def retrain(config_path: str | None, target: float, name: str, args) -> list[float]:
    """Times to the target of `--retrains` fresh trainings of a found configuration."""
    if not config_path:
        return []
    times = []
    for i in range(args.retrains):
        wait_idle()
        again = train_config(config_path, name=f"{name}-{i}", objective="time_to_target",
                             target=target, output_dir=str(args.root / "retrain"),
                             tracking_uri=args.uri)
        row = again.trials.iloc[0]
        times.append(float(row.get("time_to_target_s", math.nan)))
    return times


def run_workload(workload: str, args) -> dict:
    repeats = []
    for r in range(args.repeats):
        folder = args.root / workload / f"repeat-{r}"  # an empty measurements store each
        result, stage_s = screen_search(workload, args, folder, f"headline-{workload}")
        repeats.append({"result": result, "stage_s": stage_s,
                        **economics(result, stage_s, result.baseline)})
    first = repeats[0]
    record = str(Path(first["result"].output_dir) / "baseline.json")
    second, second_s = screen_search(workload, args, args.root / workload / "repeat-0",
                                     f"headline-{workload}-again", baseline=record)
    second_cost = sum(s for stage, s in second_s.items() if stage != "baseline")
    # The same again with twice the budget: what looking further than the first search costs
    # (a second search with the first's budget confirms only what that budget leaves).
    further, further_s = screen_search(workload, args, args.root / workload / "repeat-0",
                                       f"headline-{workload}-further", baseline=record,
                                       confirm=2 * args.confirm)
    further_cost = sum(s for stage, s in further_s.items() if stage != "baseline")

    wait_idle()
    reference = run_search(SearchSpec(
        name=f"headline-{workload}-reference", workload=workload, space=SPACE,
        objective="match_baseline", baseline=record, epochs=args.max_epochs,
        full_epochs=args.full_epochs[workload], num_trials=args.reference_trials,
        time_budget_s=args.budget, tolerance=args.tolerance, seed=args.seed,
        output_dir=str(args.root / workload), tracking_uri=args.uri))
    reference_stage_s = stage_seconds(Path(reference.output_dir))

    baseline_times = [rep["baseline_time_s"] for rep in repeats]
    scores = [rep["S"] for rep in repeats]
    target = statistics.median(scores) - args.tolerance
    base_s = statistics.median(baseline_times)
    found = retrain(first["result"].best_config_path, target, f"found-{workload}", args)
    ref_found = retrain(reference.best_config_path, target, f"reference-{workload}", args)
    speedup, ref_speedup = speedup_of(base_s, found), speedup_of(base_s, ref_found)
    errors = [e for rep in repeats for e in rep["prediction_errors"]]
    return {
        "workload": workload, "full_epochs": args.full_epochs[workload],
        "S": spread(scores), "baseline_time_s": spread(baseline_times),
        "search_cost_s": spread([rep["search_cost_s"] for rep in repeats]),
        "search_cost_baseline_runs": spread([rep["search_cost_baseline_runs"]
                                             for rep in repeats]),
        "payback_runs": spread([rep.get("payback_runs", math.nan) for rep in repeats]),
        "found_per_repeat": [rep["found"] for rep in repeats],
        "found_time_in_search_s": spread([rep["found_time_s"] or math.nan for rep in repeats]),
        "found_retrain_s": spread(found),
        "speedup": speedup, "reference_speedup": ref_speedup,
        "speedup_vs_reference": speedup / ref_speedup if speedup and ref_speedup else None,
        "prediction_error": spread(errors),
        # The same predictions with each trial's step re-timed in its own process before its
        # first epoch: what is left once the screen's reading of the machine is not.
        "start_prediction_error": spread([e for rep in repeats
                                          for e in rep["start_prediction_errors"]]),
        "second_search_cost_s": second_cost, "second_search": {
            "cost_ratio_to_first": second_cost / first["search_cost_s"],
            "found": {k: (second.best or {}).get(k) for k in second.knobs},
            "trials": len(second.trials[second.trials["role"] == "trial"])},
        "further_search": {
            "confirm": 2 * args.confirm, "cost_s": further_cost,
            "cost_ratio_to_first": further_cost / first["search_cost_s"],
            "found": {k: (further.best or {}).get(k) for k in further.knobs},
            "found_time_s": (further.best or {}).get("time_to_target_s"),
            "trials": len(further.trials[further.trials["role"] == "trial"])},
        "reference": {
            "search_cost_s": search_cost_s(reference_stage_s),
            "found": {k: (reference.best or {}).get(k) for k in reference.knobs},
            "found_retrain_s": spread(ref_found), "trials": len(reference.trials) - 1},
    }


def report(r: dict) -> list[str]:
    def m(key, fmt="{:.2f}"):
        s = r[key]
        if not s["n"]:
            return "none"
        return (fmt + " (" + fmt + "-" + fmt + ", n={})").format(s["median"], s["min"],
                                                                 s["max"], s["n"])

    speed = f"{r['speedup']:.2f}x" if r["speedup"] else "none: most retrains missed S"
    ref = f"{r['reference_speedup']:.2f}x" if r["reference_speedup"] else "none"
    return [f"\n== {r['workload']}: the baseline's accuracy at {r['full_epochs']} epochs ==",
            f"S (baseline score)          {m('S', '{:.4f}')}",
            f"baseline run (N epochs), s  {m('baseline_time_s', '{:.1f}')}",
            f"found per repeat            {r['found_per_repeat']}",
            f"speedup (median of retrains) {speed}   reference 16-trial search: {ref}",
            f"search cost, baseline runs  {m('search_cost_baseline_runs')}",
            f"payback, runs               {m('payback_runs', '{:.1f}')}",
            f"prediction error            {m('prediction_error', '{:.0%}')}",
            f"  re-timed at trial start   {m('start_prediction_error', '{:.0%}')}",
            f"second search cost          {r['second_search_cost_s']:.0f} s "
            f"({r['second_search']['cost_ratio_to_first']:.2f} of the first)",
            f"  with twice the budget     {r['further_search']['cost_s']:.0f} s "
            f"({r['further_search']['cost_ratio_to_first']:.2f} of the first, "
            f"{r['further_search']['trials']} new confirmations)",
            f"reference search cost       {r['reference']['search_cost_s']:.0f} s, "
            f"found {r['reference']['found']}"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="classifier, 1 repeat, 1 retrain")
    ap.add_argument("--workloads", nargs="+", default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--retrains", type=int, default=None)
    ap.add_argument("--confirm", type=int, default=6, help="at most this many confirmations")
    ap.add_argument("--reference-trials", type=int, default=16)
    ap.add_argument("--max-epochs", type=int, default=30, help="reference trials' plan")
    ap.add_argument("--budget", type=float, default=900.0, help="reference search budget, s")
    ap.add_argument("--tolerance", type=float, default=0.01,
                    help="about the standard error of a 2,000-sample validation accuracy (0.0096)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for runs and MLflow (default: a temp)")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args(argv)
    quick = args.quick
    args.workloads = args.workloads or (["classifier"] if quick else ["classifier", "unet3d"])
    args.repeats = args.repeats or (1 if quick else 3)
    args.retrains = args.retrains or (1 if quick else 3)
    args.full_epochs = dict(FULL_EPOCHS)
    if quick:
        args.full_epochs, args.reference_trials, args.budget = {"classifier": 4}, 4, 300.0

    import ray

    from orchestrator.resources import init_ray

    init_ray()  # one Ray session for every run below (each run joins it)
    args.root = Path(args.out or tempfile.mkdtemp(prefix="headline-"))
    args.root.mkdir(parents=True, exist_ok=True)
    args.uri = f"sqlite:///{args.root / 'mlflow.db'}"
    started = time.time()
    results = [run_workload(w, args) for w in args.workloads]
    ray.shutdown()
    for r in results:
        print("\n".join(report(r)))
    out = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine(), "wall_s": time.time() - started,
           "args": {k: str(v) for k, v in vars(args).items()},
           "workloads": {r["workload"]: r for r in results}}
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text(json.dumps(out, indent=2, default=str))
    print(f"\nresults: {args.results}  (runs and MLflow: {args.root})")


if __name__ == "__main__":
    main()
