"""How far the race's early read of one configuration moves from seed to seed, on its score and
on its validation loss: is it one validation volume's noise (the loss, a mean over every voxel,
would then read tighter than the score) or the runs themselves (both read the same spread)?

    python benchmarks/seed_reads.py OUT/unet3d/32 [OUT/unet3d/32 ...]

Each folder is one length of a `benchmarks/long_jobs.py --out OUT` run: its searches (repeat-N,
reference) all raced against the baseline its first search trained (repeat-0). Every race
contender's validated epochs, as each search sent them to MLflow (its mlflow-outbox.jsonl), are
read as the race reads them (orchestrator/screen/race.py): its running best error (1 - score),
and its running lowest validation loss, each over the baseline's at equal progress (epoch / its
plan), their log ratios weighted by progress from `FROM` of its plan to where the race stopped
it. Printed per configuration (speed switches aside) that raced in more than one search: the
ratios by search, and their spread (largest over smallest).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.records import Role, read_journal  # noqa: E402

# Points before this share of a plan are left out: the warm-up's first epochs swing most, and the
# race judges nothing before a fifth (race.RUNG).
FROM = 0.1


def validated(outbox: Path) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per trial id: (epoch, planned epochs, val_score, val_loss) of each validated epoch."""
    out: dict[str, list] = defaultdict(list)
    for line in outbox.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("op") != "log_epoch":
            continue
        step, m = entry["kwargs"]["step"], entry["kwargs"]["metrics"]
        if "val_loss" in m and m.get("val_epoch") == step:
            out[entry["kwargs"]["trial_id"]].append(
                (step, m["epochs_planned"], m["val_score"], m["val_loss"]))
    return out


def envelope(rows: list[tuple], of) -> list[tuple[float, float]]:
    """(progress, the lowest `of(row)` so far) per validated epoch: the race reads best-so-far
    curves on both sides. Not race.BaselineCurve itself: it holds 1 - the best score, floored
    at 0, and a loss above 1 (a classifier's first epochs) would read there as 1."""
    best, out = math.inf, []
    for row in rows:
        best = min(best, of(row))
        out.append((row[0] / row[1], best))
    return out


def ratios(points: list[tuple], base: list[tuple]) -> tuple[float, float]:
    """(score, loss): the contender's error (1 - score) and validation loss over the
    baseline's at equal progress, each side's running best, geometric mean weighted by progress
    from FROM on (the race's weights, without its prior)."""
    out = []
    for of in (lambda r: max(1.0 - r[2], 1e-6), lambda r: r[3]):
        baseline, logs = envelope(base, of), []
        for p, v in envelope(points, of):
            if p >= FROM:
                # linear between the baseline's points, held flat past its ends
                logs.append((p, math.log(v / np.interp(p, *zip(*baseline)))))
        out.append(math.exp(sum(p * x for p, x in logs) / sum(p for p, _ in logs))
                   if logs else math.nan)
    return out[0], out[1]


def reads(length: Path) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Per configuration (speed switches aside): per search, (progress at its last point,
    score ratio, loss ratio) of each race contender, against repeat-0's baseline."""
    first = next(length.glob("repeat-0/*/trials.jsonl")).parent
    finished, _ = read_journal(first / "trials.jsonl")
    baseline = validated(first / "mlflow-outbox.jsonl")[
        next(t for t, r in finished.items() if r.role == Role.BASELINE)]
    out: dict[str, dict] = defaultdict(dict)
    for outbox in sorted(length.glob("*/*/mlflow-outbox.jsonl")):
        seen = validated(outbox)
        finished, _ = read_journal(outbox.parent / "trials.jsonl")
        for trial_id, rec in finished.items():
            points = seen.get(trial_id)
            if rec.role != Role.TRIAL or not points:
                continue
            name = " ".join(f"{k}={rec.knobs[k]}" for k in ("batch_size", "width", "patch_size",
                                                              "precision") if k in rec.knobs)
            score, loss = ratios(points, baseline)
            out[name][outbox.parent.parent.name] = (points[-1][0] / points[-1][1], score, loss)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lengths", nargs="+", help="OUT/WORKLOAD/LENGTH folders of long_jobs.py")
    args = ap.parse_args(argv)
    for length in map(Path, args.lengths):
        print(f"== {length}  (ratio to the baseline at equal progress: score / loss)")
        for name, by in sorted(reads(length).items()):
            if len(by) < 2:
                continue
            row = "  ".join(f"{search} @{p:.2f}: {s:.2f} / {v:.2f}"
                            for search, (p, s, v) in sorted(by.items()))
            spread = [max(x[i] for x in by.values()) / min(x[i] for x in by.values())
                      for i in (1, 2)]
            print(f"  {name}: {row}  | spread {spread[0]:.2f} / {spread[1]:.2f}")


if __name__ == "__main__":
    main()
