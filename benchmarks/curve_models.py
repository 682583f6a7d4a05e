"""Which learning-curve model tells a contender's time to the target best (issue 41): the
race's own against parametric fits to the contender's own points, replayed on whole runs.

    python benchmarks/curve_models.py collect SEARCH_DIR --out CURVES.json   # trains
    python benchmarks/curve_models.py replay CURVES.json [...]               # no training
    python benchmarks/curve_models.py replay benchmarks/results/curve_models.json  # again

`collect` trains every configuration a screen search predicted (its `predictions.json`: the
searched settings, speed switches left out) once to its end, on the plan and schedule the race
gives it (race.contender_schedule: its planned epochs, warmup-stable-decay with a quarter's
warm-up), validated every epoch, with the search's seed, against its baseline and target.

`replay` decides each run at the same point with each model, from the same validated epochs,
and sets what each expected against the run's real first epoch at the target (its training
time there):

* `race`: orchestrator/screen/race.py `expect`: the baseline's curve as the prior, the
  contender's error a constant ratio of it at equal progress, fitted to its points.
* `pow3`, `exp3`: the contender's best error so far against its progress, fitted by
  least squares to c + a p^-alpha and c + a e^(-b p) (Domhan et al. 2015's most used families),
  its interval the 2.3-97.7% range of a residual bootstrap (`DRAWS` refits), its chance to reach
  the share of refits that reach the target by the plan's end.

Per model and decision point: how often the interval holds the real time, the median error of
the expected time, the Brier score of the chance to reach, the interval's width, the answer it
picks (fastest expected per chance) against the truly fastest, and how many runs it would stop
(a cut: cannot reach, or cannot beat the latest of another likely to reach, the race's bar)
that would have won.
FT-PFN (pip `ifBO`) is not among them: its wheel (0.4.1) holds no trained weights, which
`ifbo/download.py` fetches from figshare, and this machine reaches PyPI only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from orchestrator.curves import first_at  # noqa: E402
from orchestrator.evidence import LIKELY  # noqa: E402
from orchestrator.records import per_chance  # noqa: E402
from orchestrator.screen import race  # noqa: E402
from trainables.config import SPEED_ONLY  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FRACTIONS = (0.15, 0.2, 0.25, 0.4, 0.6)
DRAWS = 300
# The interval's ends, as the race's: Z standard errors either side.
LOW_Q, HIGH_Q = 0.5 * math.erfc(race.Z / math.sqrt(2)), 0.5 * math.erfc(-race.Z / math.sqrt(2))
SHAPES = {"pow3": np.logspace(-2, 1, 61), "exp3": np.logspace(-1, 2, 61)}


# -- the parametric families ---------------------------------------------------------------
def basis(kind: str, shape: float, p: np.ndarray) -> np.ndarray:
    return p ** -shape if kind == "pow3" else np.exp(-shape * p)


def fit(kind: str, p: np.ndarray, err: np.ndarray) -> tuple[float, float, float] | None:
    """(c, a, shape) of err ~ c + a basis(p) with c, a >= 0, least squares (a grid over the
    shape, c and a in closed form at each); None with fewer than 3 points."""
    if len(p) < 3:
        return None
    best = _best_of(kind, p, err, SHAPES[kind])
    step = SHAPES[kind][1] / SHAPES[kind][0]  # then finer, about the best of the grid
    return _best_of(kind, p, err, best[3] * step ** np.linspace(-1, 1, 41))[1:]


def _best_of(kind: str, p: np.ndarray, err: np.ndarray, shapes) -> tuple[float, ...]:
    """(squared error, c, a, shape) of the best of `shapes`."""
    best = None
    for shape in shapes:
        x = basis(kind, shape, p)
        design = np.stack([np.ones_like(x), x], axis=1)
        (c, a), *_ = np.linalg.lstsq(design, err, rcond=None)
        if c < 0 or a < 0:  # on the boundary: one of them 0, the other by least squares
            c, a = (0.0, float(x @ err / (x @ x))) if c < 0 else (float(err.mean()), 0.0)
            c, a = max(c, 0.0), max(a, 0.0)
        sse = float(((c + a * x - err) ** 2).sum())
        if best is None or sse < best[0]:
            best = (sse, float(c), float(a), float(shape))
    return best


def crossing(kind: str, params: tuple[float, float, float], err: float) -> float:
    """The progress at which the fitted error falls to `err` (inf: never)."""
    c, a, shape = params
    if err <= c or a <= 0:
        return math.inf
    if kind == "pow3":
        return (a / (err - c)) ** (1 / shape)
    return max(0.0, -math.log((err - c) / a) / shape)


def parametric(kind: str, p: np.ndarray, err: np.ndarray, target_err: float,
               rng: np.random.Generator) -> dict | None:
    """The progress to the target at the low, expected and high ends, and the chance to reach
    it by the plan's end (p = 1), from a residual bootstrap of the fit."""
    params = fit(kind, p, err)
    if params is None:
        return None
    c, a, shape = params
    fitted = c + a * basis(kind, shape, p)
    residuals = err - fitted
    draws = []
    for _ in range(DRAWS):
        again = fit(kind, p, np.clip(fitted + rng.choice(residuals, len(p)), 1e-6, None))
        draws.append(crossing(kind, again, target_err) if again else math.inf)
    at = np.array([d if d <= 1.0 else math.inf for d in draws])
    q = np.quantile(np.where(np.isinf(at), 1e9, at), [LOW_Q, 0.5, HIGH_Q])
    low, mid, high = (math.inf if v >= 1e9 else float(v) for v in q)
    return {"low": low, "mid": mid, "high": high, "reach": float(np.isfinite(at).mean())}


# -- one run, decided at one point -----------------------------------------------------------
def envelope(curve: list, upto: int) -> list[tuple[int, float, float]]:
    """(epoch, best score so far, training time) of every validated epoch up to `upto`."""
    best, out = 0.0, []
    for e, s, t in curve:
        if int(e) > upto:
            break
        best = max(best, float(s))
        out.append((int(e), best, float(t)))
    return out


def decided(run: dict, baseline: dict, target: float, fraction: float, model: str,
            rng: np.random.Generator) -> dict:
    """What `model` expects of `run` deciding at `fraction` of the share of its schedule the
    race reads (race.horizon): epochs, in seconds at one pace a run (`epoch_s`, the screen's
    timing of it, where `collect` had one; else its median epoch), so that a busy moment of the
    machine moves no model's error; `reached_before`: it reached the target by then (the
    stopper took it: nothing to expect)."""
    planned, curve = int(run["planned"]), run["curve"]
    per_epoch = float(run.get("epoch_s") or pace(curve))
    at = max(race.POINTS + 1, math.ceil(fraction * race.horizon(baseline, target) * planned))
    seen = envelope(curve, at)
    real = first_at(curve, target)
    out = {"knobs": run["knobs"], "at_epoch": at, "of": planned,
           "real_s": real.epoch * per_epoch if real else math.inf}
    if real is not None and real.epoch <= at:
        return out | {"reached_before": True, "low_s": out["real_s"], "mid_s": out["real_s"],
                      "high_s": out["real_s"], "reach": 1.0}
    now = seen[-1][0]

    def seconds(progress: float) -> float:
        if not math.isfinite(progress):
            return math.inf
        return max(now + 1, math.ceil(progress * planned - 1e-9)) * per_epoch

    if model == "race":
        every = race.point_every(baseline, target)
        points = [(e / planned, s) for e, s, _ in seen if e % every == 0 or e >= planned]
        found = race.expect(race.BaselineCurve(baseline["curve"]), points, target, planned,
                            (now, now * per_epoch, per_epoch))
        if found is None:
            return out | {"undecided": True}
        mid = found.mid_s if math.isfinite(found.mid_s) else found.high_s
        return out | {"low_s": found.low_s, "mid_s": mid, "high_s": found.high_s,
                      "reach": found.reach}
    p = np.array([e / planned for e, _, _ in seen])
    err = np.array([max(1.0 - s, 1e-6) for _, s, _ in seen])
    told = parametric(model, p, err, 1.0 - target, rng)
    if told is None:
        return out | {"undecided": True}
    return out | {"low_s": seconds(told["low"]), "mid_s": seconds(told["mid"]),
                  "high_s": seconds(told["high"]), "reach": told["reach"]}


def pace(curve: list) -> float:
    """Seconds an epoch: the median of the run's epoch-to-epoch training times."""
    times = [0.0] + [float(t) for _, _, t in curve]
    return statistics.median(b - a for a, b in itertools.pairwise(times))


def headline_sets(path: Path) -> list[dict]:
    """The runs benchmarks/headline.py trained to their end (`cut_retrains`), a set a
    workload, in the form `collect` writes."""
    data = json.loads(path.read_text())
    return [{"name": f"{w} {row['full_epochs']} (headline)", "target": row["target"],
             "baseline": {"curve": row["baseline_curve"], "epochs": row["full_epochs"]},
             "runs": [{"knobs": r["knobs"], "planned": r["epochs"], "curve": r["curve"]}
                      for r in row.get("cut_retrains") or []]}
            for w, row in data["workloads"].items() if row.get("cut_retrains")]


# -- over a set of runs ------------------------------------------------------------------------
def scored(rows: list[dict]) -> dict:
    """Calibration over the decided runs (the interval and the error over those that reached
    the target, the Brier score of the chance to reach over all); the pick and the cuts over
    all of them."""
    judged = [r for r in rows if not r.get("undecided") and not r.get("reached_before")]
    reached = [r for r in judged if math.isfinite(r["real_s"])]
    covered = [r["low_s"] <= r["real_s"] <= r["high_s"] for r in reached]
    errors = [abs(r["mid_s"] - r["real_s"]) / r["real_s"] for r in reached
              if math.isfinite(r["mid_s"])]
    widths = [r["high_s"] / r["low_s"] for r in judged
              if math.isfinite(r["high_s"]) and r["low_s"] > 0]
    ranked = [r for r in rows if not r.get("undecided") and r["reach"] > 0]
    pick = min(ranked, key=lambda r: per_chance(r["mid_s"], r["reach"]), default=None)
    best = min(r["real_s"] for r in rows)
    # The race's bar (Evidence.best_bound): another's latest, of those likely to reach it.
    cuts = [r for r in rows if not r.get("undecided") and not r.get("reached_before") and (
        math.isinf(r["low_s"]) or r["low_s"] > min(
            (o["high_s"] for o in rows if o is not r and not o.get("undecided") and
             o["reach"] >= LIKELY), default=math.inf))]
    answer_s = pick["real_s"] if pick else math.inf
    return {
        "judged": len(judged), "reached_before": sum(bool(r.get("reached_before")) for r in rows),
        "reached": len(reached), "covered": sum(covered),
        "median_error": statistics.median(errors) if errors else None,
        "unexpected": len(reached) - len(errors),
        "brier": statistics.fmean((r["reach"] - math.isfinite(r["real_s"])) ** 2
                                  for r in judged) if judged else None,
        "median_width": statistics.median(widths) if widths else None,
        "reach_of_reached": _mean(r["reach"] for r in reached),
        "reach_of_missed": _mean(r["reach"] for r in judged if math.isinf(r["real_s"])),
        "pick": pick["knobs"] if pick else None,
        "pick_over_best": answer_s / best if pick and math.isfinite(best) else None,
        "cut": len(cuts), "cut_would_have_won": sum(r["real_s"] < answer_s for r in cuts),
    }


def _sets(loaded: dict) -> list[dict]:
    """What `collect` wrote, or what an earlier `replay` wrote (its sets' runs, the headline's
    aside: those are read again from `--headline`)."""
    if "sets" not in loaded:
        return [loaded]
    return [s["data"] for name, s in loaded["sets"].items() if not name.endswith("(headline)")]


def _mean(values) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def replay(paths: list[str], fractions=FRACTIONS, models=("race", "pow3", "exp3"),
           seed: int = 0, headline: str | None = None) -> dict:
    out: dict = {"sets": {}, "models": list(models), "fractions": list(fractions)}
    sets = [data for p in paths for data in _sets(json.loads(Path(p).read_text()))]
    for data in sets + (headline_sets(Path(headline)) if headline else []):
        baseline, target = data["baseline"], float(data["target"])
        found = out["sets"].setdefault(data["name"], {"runs": len(data["runs"]), "by": {},
                                                      "data": data})  # replayable from here
        for fraction in fractions:
            for model in models:
                rng = np.random.default_rng(seed)
                rows = [decided(r, baseline, target, fraction, model, rng) for r in data["runs"]]
                found["by"][f"{model}@{fraction}"] = {**scored(rows), "rows": rows}
    return out


def collect(search: Path, out: Path, seed: int | None) -> None:
    """Train each configuration `search` predicted to its end on the race's plan (resumable:
    what `out` holds is not trained again)."""
    from runs import train_to_end

    from orchestrator import resources

    resources.init_ray()
    base = json.loads((search / "best_config.json").read_text())["config"]
    baseline = json.loads((search / "baseline.json").read_text())
    target = float(baseline["val_score"]) - float(json.loads(
        (search / "search_state.json").read_text())["spec"]["tolerance"])
    seed = base["seed"] if seed is None else seed
    data = json.loads(out.read_text()) if out.is_file() else {
        "name": f"{base['workload']} {baseline['epochs']}", "seed": seed, "target": target,
        "baseline": {k: baseline[k] for k in ("curve", "epochs", "train_time_s")}, "runs": []}
    have = {json.dumps(r["knobs"], sort_keys=True) for r in data["runs"]}
    for pred in json.loads((search / "predictions.json").read_text()):
        knobs = {k: v for k, v in pred["config"].items()
                 if k not in ("workload", "epochs", "seed") and k not in SPEED_ONLY}
        if json.dumps(knobs, sort_keys=True) in have:
            continue
        have.add(json.dumps(knobs, sort_keys=True))
        planned = int(pred["planned_epochs"])
        # Its pace as the screen timed it, every configuration on one clock: the runs below
        # may share the machine.
        epoch_s = pred["predicted_time_s"] / max(1, int(pred["predicted_epochs"]))
        config = {**base, **knobs, "epochs": planned, "channels_last": False,
                  "checkpoint_every": 0, **race.VALIDATION,  # as the race validates
                  "schedule": "wsd", "warmup_epochs": race.WARMUP_SHARE * planned}
        name = "-".join(f"{k}{v}" for k, v in knobs.items())
        run = train_to_end(config, target, name, seed, out.parent / "train",
                           f"sqlite:///{out.parent / 'mlflow.db'}")
        data["runs"].append({"knobs": knobs, "planned": planned, "epoch_s": epoch_s, **run})
        out.write_text(json.dumps(data))
        print(f"{name}: {run['epochs']} epochs, {run['train_time_s']:.1f} s, target at "
              f"{run['time_to_target_s']}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("search", help="a screen search's folder (output_dir/name)")
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int, default=None)
    r = sub.add_parser("replay")
    r.add_argument("curves", nargs="*")
    r.add_argument("--headline", default=str(RESULTS / "headline.json"),
                   help="also the runs benchmarks/headline.py trained to their end ('' : not)")
    r.add_argument("--fractions", nargs="+", type=float, default=list(FRACTIONS))
    r.add_argument("--results", default=str(RESULTS / "curve_models.json"))
    args = ap.parse_args(argv)
    if args.command == "collect":
        collect(Path(args.search), Path(args.out), args.seed)
        return
    out = replay(args.curves, args.fractions, headline=args.headline or None)
    for name, s in out["sets"].items():
        print(f"{name}: {s['runs']} runs")
        for key, by in s["by"].items():
            print(f"  {key:10s} " + " ".join(f"{k}={v}" for k, v in by.items() if k != "rows"))
    Path(args.results).write_text(json.dumps(out, indent=1, default=str))
    print(f"results: {args.results}")


if __name__ == "__main__":
    main()
