"""The answer's economics: how much faster, at what cost, paid back when. One definition, here,
for the printed summary, `economics.json`, the MLflow parent run and the benchmarks.

Both sides of every speedup are the same kind of time on the same clock: training time
(`train_time_s`: the workers' training steps, without validation, Ray's start-up or the
trial's warm-up), and each side's process warmed up before its clock starts (its first-use
costs, `first_use_s`, are recorded apart, for both). The cost is not: it is wall time, set
against the baseline's training time (below), so a cost in baseline runs errs high.

    speedup               baseline_s / found_s: the baseline's run as the user makes it (its N
                          epochs) against the answer trained as it is handed over
                          (best_config.json, its epochs, to its end: orchestrator/measure.py),
                          which reached S - tolerance
    speedup_same_target   baseline_time_to_target_s / found_time_to_target_s: each run's first
                          validated epoch at S - tolerance
    loop_alone_speedup    the baseline's own settings in the optimized loop, projected to its N
                          epochs: the part of the speedup that needs no search;
                          `search_adds` = speedup / loop_alone_speedup
    search_cost_s         the search's wall time from start to finish (Ray's start included),
                          minus the baseline's run, and nothing else; `stage_s` splits it
                          by stage, `losers_s` is the training of what was not handed over
    search_cost_baseline_runs  search_cost_s / baseline_s: the search's wall (its
                          validations, trial starts and screen jobs included) over the
                          baseline's training alone. Unet3d's 32-epoch baseline trained 64 s in
                          an 87-s trial (17 s of it validation), so a search of 78 s reads 1.22
                          runs where it took 0.89 of that trial's wall
    payback_runs          search_cost_s / (baseline_s - found_s): runs until the time saved
                          pays for the search
    pace_vs_confirmation  the answer's measured run's samples/s over its confirmation's (the
                          same settings and switches): 1 where the machine's speed held
                          between them; beyond `PACE_NOISE` the summary says so
    hit_rate              confirmations that reached the target / confirmations run; a race's
                          decided contender is a hit where its measured run reached the target,
                          a miss where it did not, and counts neither way where it was not
                          measured; the prediction error is over those that reached it (a
                          decided one's against its measured run, as handed over)
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.curves import first_at
from orchestrator.history_baseline import drifted
from orchestrator.records import TrialRecord
from trainables.config import SPEED_ONLY, TrialConfig
from trainables.identity import LENGTH_SETTINGS, key_without
from trainables.status import TrialStatus


# How far a measured run's pace may lie from its confirmation's (the same settings and switches,
# another length, in another process) and still be one speed. On the AMD 2-core VM, unet3d's
# batch-4 answer trained 55.3 samples/s in its race, 51.6 alone (`orchestrator train`), 47.6 and
# 42.5 in two searches' measured runs; the last alternated 2.0-s and 3.0-s epochs in stretches
# of 3-9 epochs, and its speedup read 1.70x where the same run alone gives 2.06x
# (docs/benchmarks.md). A pace beyond it is said, not corrected: which side was disturbed is
# not known.
PACE_NOISE = 0.2


def payback(cost_s: float, base_s: float | None, found_s: float | None) -> float | None:
    """Runs until what a search cost is saved back: its cost over what the answer saves a
    baseline run (None where it saves nothing)."""
    return cost_s / (base_s - found_s) if base_s and found_s and found_s < base_s else None

@dataclass(frozen=True)
class Economics:
    target: float
    baseline_s: float
    """The baseline's training time, its whole run (N epochs)."""
    baseline_time_to_target_s: float | None
    search_cost_s: float
    search_cost_baseline_runs: float
    found_s: float | None = None
    """The answer's training time, trained as handed over, to its end; None: no answer."""
    found_time_to_target_s: float | None = None
    speedup: float | None = None
    speedup_same_target: float | None = None
    loop_alone_speedup: float | None = None
    search_adds: float | None = None
    payback_runs: float | None = None
    """None: the answer is not faster than the baseline (it never pays back)."""
    hit_rate: float | None = None
    confirmations: int = 0
    hits: int = 0
    misses: list[dict] = field(default_factory=list)
    """The confirmations that did not reach the target: id, status, why."""
    prediction_error: float | None = None
    """Median |predicted - measured| / measured time to the target, over the hits."""
    start_prediction_error: float | None = None
    first_use_s: dict[str, float | None] = field(default_factory=dict)
    """Each side's warm-up before its clock (outside both): baseline, found."""
    found_epochs: int | None = None
    found_score: float | None = None
    """The answer's best validated score in its measured run."""
    hold_margin: float | None = None
    """How far above the target a run must end for another seed's to reach it (orchestrator/
    lengths.py `hold_margin`); `holds`: the answer's did (None: no answer)."""
    holds: bool | None = None
    pace_vs_confirmation: float | None = None
    """The measured run's samples/s over its confirmation's; None: nothing to hold it to (no
    answer, or one measured by an earlier search)."""
    stage_s: dict[str, float] = field(default_factory=dict)
    """Each stage's wall time in the cost (the baseline's only where it was not trained here:
    its step timed, or its record read)."""
    losers_s: float = 0.0
    """Training time of the confirmations that are not the answer: what the search spent on
    configurations it did not hand over."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self) -> dict[str, float]:
        """The numeric fields, as MLflow metrics of the parent run."""
        return {k: float(v) for k, v in self.to_dict().items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2, default=str))


def compute(*, baseline: dict, target: float, measured: dict | None, cost_s: float,
            confirmations: list[TrialRecord], loop_alone_s: float | None = None,
            base: dict | None = None, stage_s: dict[str, float] | None = None) -> Economics:
    """The economics of a search: its baseline's record, its measured answer (measured.json),
    its cost and its confirmations (this search's trials; `base`: the fixed settings under
    their knobs)."""
    base_s = float(baseline["train_time_s"])
    base_at = first_at(baseline.get("curve") or [], target)
    answer = _key(measured["config"]) if measured else None
    losers_s = sum(float(r.metrics["train_time_s"]) for r in confirmations
                   if _run(base, r) != answer and _finite(r.metrics.get("train_time_s")))
    told = _measured_runs(measured)  # a decided contender's run -> its time to the target
    outcome = {r.trial_id: told.get(_run(base, r)) if r.status == TrialStatus.DECIDED
               else (r.time_to_target_s if r.reached else math.inf) for r in confirmations}
    confirmations = [r for r in confirmations if outcome[r.trial_id] is not None]
    hits = [r for r in confirmations if math.isfinite(outcome[r.trial_id])]
    errors = [abs(e) for e in (_prediction_error(r, outcome[r.trial_id]) for r in hits)
              if _finite(e)]
    started = [abs(r.metrics["start_prediction_error"]) for r in hits
               if _finite(r.metrics.get("start_prediction_error"))]
    found_s = float(measured["train_time_s"]) if measured and measured["reached"] else None
    found_at = measured.get("time_to_target_s") if found_s else None
    speedup = base_s / found_s if found_s else None
    loop_alone = base_s / loop_alone_s if loop_alone_s else None
    return Economics(
        target=target, baseline_s=base_s,
        baseline_time_to_target_s=base_at.seconds if base_at else None,
        search_cost_s=cost_s, search_cost_baseline_runs=cost_s / base_s,
        found_s=found_s, found_time_to_target_s=found_at, speedup=speedup,
        speedup_same_target=(base_at.seconds / found_at) if base_at and found_at else None,
        loop_alone_speedup=loop_alone,
        search_adds=speedup / loop_alone if speedup and loop_alone else None,
        payback_runs=payback(cost_s, base_s, found_s),
        hit_rate=len(hits) / len(confirmations) if confirmations else None,
        confirmations=len(confirmations), hits=len(hits),
        misses=[{"trial_id": r.trial_id, "status": str(r.status), "reason": r.reason}
                for r in confirmations if not math.isfinite(outcome[r.trial_id])],
        prediction_error=statistics.median(errors) if errors else None,
        start_prediction_error=statistics.median(started) if started else None,
        first_use_s={"baseline": baseline.get("first_use_s"),
                     "found": measured.get("first_use_s") if measured else None},
        found_epochs=int(measured["epochs"]) if measured else None,
        found_score=measured.get("best_score") if measured else None,
        hold_margin=measured.get("hold_margin") if measured else None,
        holds=measured.get("holds") if found_s else None,
        pace_vs_confirmation=_pace_ratio(measured) if found_s else None,
        stage_s={k: float(v) for k, v in (stage_s or {}).items()},
        losers_s=losers_s)


def lines(e: Economics, baseline: dict, errors: list[dict]) -> list[str]:
    """The printed summary."""
    out = []
    if e.found_s is None:
        out.append("best: nothing reached the baseline's score trained as exported; no "
                   "speedup to claim")
    else:
        out.append(f"speedup            {e.speedup:.2f}x: the baseline's {baseline.get('epochs')}"
                   f" epochs {e.baseline_s:.1f} s -> best_config.json's {e.found_epochs} epochs "
                   f"{e.found_s:.1f} s of training (best {e.found_score:.4f}, target "
                   f"{e.target:.4f})")
        if e.speedup_same_target:
            out.append(f"  to the same target {e.speedup_same_target:.2f}x "
                       f"({e.baseline_time_to_target_s:.1f} s -> "
                       f"{e.found_time_to_target_s:.1f} s, each run's first epoch at it)")
        if e.holds is False:
            out.append(f"  on the line: its run ended {e.found_score - e.target:.4f} above the "
                       f"target, within a retrain's noise ({e.hold_margin:.4f}): trained with "
                       "another seed, it may end below it")
        if not pace_held(e.pace_vs_confirmation):
            out.append(f"  pace check: its measured run trained at {e.pace_vs_confirmation:.2f}x"
                       " its confirmation's samples/s (the same settings): this machine's speed "
                       "moved between them; `orchestrator train best_config.json` times it again")
        if e.loop_alone_speedup:
            out.append(f"  the optimized loop alone at the baseline's settings "
                       f"{e.loop_alone_speedup:.2f}x (projected), the search "
                       f"{e.search_adds:.2f}x on top")
    out.append(f"search cost        {e.search_cost_s:.0f} s = {e.search_cost_baseline_runs:.1f}"
               f" baseline runs (wall time from start to finish, the baseline's run excluded)")
    if e.stage_s:
        out.append("  by stage         " + ", ".join(
            f"{stage} {seconds:.0f} s" for stage, seconds in e.stage_s.items()
            if seconds >= 0.5) +
            f"; {e.losers_s:.0f} s of it trained configurations not handed over")
    if e.found_s is not None:
        out.append(f"payback            after {e.payback_runs:.1f} runs (each saves "
                   f"{e.baseline_s - e.found_s:.1f} s)" if e.payback_runs is not None else
                   "payback            never: the answer is not faster than the baseline")
    if e.confirmations:
        out.append(f"hit rate           {e.hits} of {e.confirmations} confirmations reached "
                   "the target")
    for err in errors:
        start = f"; {err['at_start_s']:.1f} s re-timed at its start ({err['start_error']:+.0%})" \
            if _finite(err.get("start_error")) else ""
        out.append(f"predicted/measured {err['trial_id']}: {err['predicted_s']:.1f} s predicted,"
                   f" {err['measured_s']:.1f} s to the target ({err['error']:+.0%}){start}")
    return out


def pace_held(ratio: float | None) -> bool:
    """A measured run's pace within `PACE_NOISE` of its confirmation's, or nothing to tell."""
    return not drifted(ratio, PACE_NOISE)


def _pace_ratio(measured: dict) -> float | None:
    """The measured run's samples/s over its confirmation's (measure.py records both)."""
    pace, confirmed = measured.get("samples_per_s"), measured.get("confirmed_samples_per_s")
    return pace / confirmed if _finite(pace) and _finite(confirmed) and pace > 0 and \
        confirmed > 0 else None


def _run(base: dict | None, rec: TrialRecord) -> str:
    """What a configuration trains, every setting resolved, its length and speed switches
    aside."""
    return _key(TrialConfig.from_dict({**(base or {}), **rec.knobs}).to_dict())


def _key(config: dict) -> str:
    """A resolved configuration's run, its length and speed switches aside."""
    return key_without(config, SPEED_ONLY | LENGTH_SETTINGS)


def _measured_runs(measured: dict | None) -> dict[str, float]:
    """Each configuration the measure stage trained: its first time to the target as handed
    over (inf: no attempt reached it)."""
    out: dict[str, float] = {}
    for attempt in (measured or {}).get("attempts", []):
        key = _key(attempt["config"])
        at = attempt.get("time_to_target_s") if attempt["reached"] else None
        out[key] = min(out.get(key, math.inf), float(at) if at is not None else math.inf)
    return out


def _prediction_error(rec: TrialRecord, measured_s: float) -> float | None:
    """(predicted - measured) / measured time to the target: the confirmation's own, or, for
    a contender the race decided, against its run as handed over (the measure stage's)."""
    if rec.status != TrialStatus.DECIDED:
        return rec.metrics.get("prediction_error")
    predicted = rec.metrics.get("predicted_time_to_target_s")
    return (predicted - measured_s) / measured_s if _finite(predicted) and measured_s > 0 \
        else None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
