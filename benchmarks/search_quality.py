"""Search quality: how many trials TPE needs to get within 2% of the best, against random search.

    python benchmarks/search_quality.py                    # 10 seeds, 40 trials each
    python benchmarks/search_quality.py --seeds 3

Trials are looked up in benchmarks/data/classifier_grid.csv: real training results recorded once
by benchmarks/record_lookup_table.py (a full search per seed would take hours here). Each study
uses the search's own objective (weighted, w=0.05) and the same sampler settings as
`orchestrator.search.make_searcher`, in plain Optuna: the samplers are what is compared.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.objective import WeightedObjective  # noqa: E402

TABLE = Path(__file__).parent / "data" / "classifier_grid.csv"
KNOBS = {"precision": str, "batch_size": int, "patch_size": int, "width": float}


def load_table(path: Path) -> dict[tuple, dict]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {tuple(conv(r[k]) for k, conv in KNOBS.items()):
            {"val_score": float(r["val_score"]), "train_time_s": float(r["train_time_s"])}
            for r in rows}


def trials_to_target(sampler, table, choices, objective, target, budget) -> int:
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for n in range(1, budget + 1):
        trial = study.ask()
        key = tuple(trial.suggest_categorical(k, choices[k]) for k in KNOBS)
        value = objective(table[key])["objective"]
        study.tell(trial, value)
        if value >= target:
            return n
    return budget + 1  # not reached within the budget (counted as budget + 1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=40, help="max trials per study")
    ap.add_argument("--within", type=float, default=0.02, help="relative gap to the best")
    ap.add_argument("--table", default=str(TABLE))
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    table = load_table(Path(args.table))
    choices = {k: sorted({key[i] for key in table}, key=str) for i, k in enumerate(KNOBS)}
    objective = WeightedObjective()
    best = max(objective(m)["objective"] for m in table.values())
    target = best - args.within * abs(best)
    hits = sum(objective(m)["objective"] >= target for m in table.values())
    print(f"{len(table)} configs, best objective {best:.4f}, target >= {target:.4f} "
          f"({hits} configs reach it; random needs {len(table) / hits:.1f} trials on average)")

    results = {"TPE": [], "random": []}
    for seed in range(args.seeds):
        # Same TPE settings as the search uses for a 20-trial search.
        tpe = optuna.samplers.TPESampler(seed=seed, n_startup_trials=5)
        results["TPE"].append(trials_to_target(tpe, table, choices, objective, target,
                                               args.budget))
        rnd = optuna.samplers.RandomSampler(seed=seed)
        results["random"].append(trials_to_target(rnd, table, choices, objective, target,
                                                   args.budget))
    print("\n| sampler | trials to within "
          f"{100 * args.within:.0f}% of best, per seed | mean | median |")
    print("|---|---|---:|---:|")
    for name, counts in results.items():
        print(f"| {name} | {counts} | {statistics.mean(counts):.1f} | "
              f"{statistics.median(counts):.1f} |")
    ratio = statistics.mean(results["random"]) / statistics.mean(results["TPE"])
    print(f"\nrandom / TPE (mean trials): {ratio:.2f}x")


if __name__ == "__main__":
    main()
