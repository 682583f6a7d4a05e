"""The measure stage over decided contenders whose runs are known (no training): what the
measure tests drive (tests/orchestrator/test_measure.py, test_measure_hold.py)."""

from __future__ import annotations

import math

from orchestrator.records import TrialRecord
from trainables.status import TrialStatus


def measure_stage(tmp_path, decided: list[TrialRecord], runs: dict[tuple[int, int], list],
                   target: float = 0.7775, baseline_s: float = 1000.0,
                   baseline_curve: list | None = None, tolerance: float | None = None):
    """The measure stage over `decided` contenders, each length's run known (as an earlier
    search's measurement is): `runs[(batch, epochs)]` = its validated scores. Nothing trains:
    a length not in `runs` fails the test. Returns the lengths asked for, the answer, the log."""
    from types import SimpleNamespace

    from orchestrator import measure

    asked, said = [], []

    def known(ctx, config):
        key = (config["batch_size"], config["epochs"])
        asked.append(key)
        scores = runs[key]
        curve = [[i + 1, s, float(i + 1)] for i, s in enumerate(scores)]
        at = next((c for c in curve if c[1] >= target), None)
        return {"config": config, "epochs": key[1], "curve": curve,
                "best_score": max(scores, default=None),
                "reached": at is not None, "time_to_target_s": at[2] if at else None,
                "train_time_s": float(len(scores)), "search_id": "s"}

    ctx = SimpleNamespace(
        folder=SimpleNamespace(measured=tmp_path / "measured.json"),
        objective=SimpleNamespace(target=target, **({} if tolerance is None else
                                                     {"tolerance": tolerance})),
        prepared=SimpleNamespace(base={}),
        spec=SimpleNamespace(epochs=60), book=SimpleNamespace(finished=lambda role: decided),
        baseline={"train_time_s": baseline_s, "curve": baseline_curve or []},
        say=said.append, search_id="s")
    strategy = SimpleNamespace(earlier=lambda: [], known_measurement=known)
    measure.run(ctx, strategy)
    return asked, measure.read(ctx), said


def decided(tid: str, knobs: dict, seconds: float, reach: float, expected_epoch: int
             ) -> TrialRecord:
    """A contender the race decided with `knobs`: expected at the target in `seconds`, at
    `expected_epoch`, with a `reach` chance."""
    metrics = {"time_to_target_s": math.nan, "expected_time_to_target_s": seconds,
               "expected_reach": reach, "expected_epoch": expected_epoch}
    return TrialRecord(tid, 1, knobs, 0.0, 1.0, TrialStatus.DECIDED, metrics=metrics)


def told(tid: str, batch: int, planned: int, expected_epoch: int, seconds: float):
    """A contender the race decided, expected at the target at `expected_epoch` of `planned`."""
    knobs = {"batch_size": batch, "precision": "bf16-mixed", "epochs": planned}
    return decided(tid, knobs, seconds, 0.5, expected_epoch)


def model(tid: str, width: float, batch: int, precision: str, planned: int, seconds: float,
           reach: float = 1.0, expected_epoch: int | None = None) -> TrialRecord:
    """A contender the race decided, of its own width and precision."""
    knobs = {"width": width, "batch_size": batch, "precision": precision, "epochs": planned}
    return decided(tid, knobs, seconds, reach, expected_epoch or planned)


# The classifier's 15-epoch baseline of the headline (seed 0): [epoch, score, seconds].
BASELINE_15 = [[e, s, 3.4 * e] for e, s in enumerate(
    [0.3825, 0.459, 0.5225, 0.582, 0.669, 0.719, 0.70, 0.7025, 0.741, 0.747, 0.7455, 0.752,
     0.762, 0.762, 0.7655], start=1)]
