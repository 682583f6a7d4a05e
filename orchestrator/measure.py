"""The measure stage: the answer, trained as it is handed over.

The configuration the race expects at the target first is exported with the epochs it needs,
E, its schedule planned for them (`best_config.json`), and trained so, to its end: the speedup's
numerator (orchestrator/economics.py); `orchestrator train best_config.json` is the same run.

**It goes on from the race.** A contender trains warmup-stable-decay with its warm-up in
epochs (race.contender_schedule), so E epochs on that warm-up take its learning rates step for
step until they decay: the measured run goes on from the contender's checkpoint and trains
E - d epochs (trainables/loop/resume.py; tests/integration/test_goes_on.py). An E too short for
that warm-up is handed over on the schedule the race replaced (`race.schedule_for`).

A run whose best score ends below the target is measured longer: a quarter longer at a time
from the missed run's checkpoint where its decay began, where the race's schedule lets it, else
halfway to its plan, then its plan (orchestrator/lengths.py). Each attempt is a run of its own
in the search's cost; what a search measured later searches of the same question on this
machine kind know (the strategy's `known_measurement`). A run on the line is lengthened until
one ends beyond a retrain's noise: where its curve makes that up, then as a miss would be, once
(`lengths.to_hold`); one that reached the target well before its end is measured shorter, once
(`_shorter`). Why each: docs/screen.md.

A measured miss teaches as a confirmation's does:
* **Lengthened only while it pays** (orchestrator/lengths.py `why_not_longer`; on the
  classifier a longer schedule overfits), but for a last resort (`_last_resort`).
* **The sooner first, per chance: a candidate or a longer run.** A longer run of a miss goes
  before the next candidate where it ends sooner at the missed run's pace, over its chance
  (`lengths.lengthening_chance`), than the candidate is expected at the target over its own
  (`_sooner`; `_waiting`: one passed over). Where the runs measured so far took longer than the
  race expected, its other expected times are taken as late (orchestrator/told.py).
* **Each candidate that could pay.** After a miss a candidate is measured where, reaching the
  target, it gets there before the baseline's run would end (`told.not_worth`); its time per
  chance of reaching only orders the candidates. They are the race's decided contenders.
* **What learns no more is not measured next.** The next configuration measured is the fastest
  that does not learn less than one measured short (orchestrator/evidence.py
  `learns_no_more`: the same model at as large a batch or larger, at no finer a precision, or at
  any precision after a miss larger than a precision can make up), at as large a share of its
  plan or smaller (further along it, it may learn more: docs/screen.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from orchestrator import told
from orchestrator.curves import first_at
from orchestrator.evidence import learns_no_more
from orchestrator.lengths import (MEASURE_POINTS, MIDDLE_SHORTER, SHORTER_POINTS, attempts,
                                  decay_epoch, going_on_from, hold_margin, lengthening_chance,
                                  retrain_noise, to_hold, validation_cadence, why_not_longer)
from orchestrator.measured import as_confirmed, describe, measurement
from orchestrator.records import Role, TrialRecord, per_chance
from orchestrator.screen import race
from orchestrator.stages import StageContext
from orchestrator.stopper import validation_gate
from orchestrator.tune_runs import TuneRun, trainable
from trainables.config import TrialConfig
from trainables.status import TrialStatus, traits
from trainables.trial.trainable import reuse_actors

# Settings a search adds to its trials for its own bookkeeping, not part of what it hands over.
SEARCH_ONLY = ("val_skip_above_loss", "val_skip_until")


def ranked(ctx: StageContext, strategy) -> list[TrialRecord]:
    """The configurations fastest to the target, fastest first: reached in the least training
    time, or (the race) expected to reach it soonest per chance of reaching it
    (`TrialRecord.per_chance_s`); this search's trials and the earlier searches' results it
    reuses."""
    records = ctx.book.finished(Role.TRIAL) + strategy.earlier()
    reached = [r for r in records if r.reached and traits(r.status).rankable]
    told = [r for r in records if r.status == TrialStatus.DECIDED and r.expected_s is not None]
    return sorted([*reached, *told], key=lambda r: r.per_chance_s)


def winner(ctx: StageContext, strategy) -> TrialRecord | None:
    found = ranked(ctx, strategy)
    return found[0] if found else None


def epochs_needed(rec: TrialRecord, target: float, planned: int) -> int:
    """The epochs the winner is first measured at: where it first reached the target, or
    where the race expects it to (its expected ratio's epoch, orchestrator/screen/race.py)."""
    reached = first_at(rec.curve, target)
    if reached is not None:
        return reached.epoch
    expected = rec.metrics.get("expected_epoch")
    return min(planned, int(expected)) if expected else planned


def exported(ctx: StageContext, rec: TrialRecord, epochs: int) -> dict[str, Any]:
    """The full configuration handed over: the fixed settings, the trial's knobs and its
    profile's picks, for `epochs` epochs (the schedule is planned for them)."""
    config = {**ctx.prepared.base, **rec.knobs, **rec.picks, "epochs": int(epochs)}
    defaults = TrialConfig().to_dict()
    config |= {k: defaults[k] for k in SEARCH_ONLY}
    if "warmup_epochs" in rec.knobs:  # the race's schedule, where it suits `epochs`
        config |= race.schedule_for(config, ctx.prepared.base)
    return TrialConfig.from_dict(config).to_dict()


def run(ctx: StageContext, strategy) -> None:
    """Measure the winner as exported; write measured.json (absent: nothing reached the
    target), with every attempt."""
    ctx.folder.measured.unlink(missing_ok=True)
    candidates = ranked(ctx, strategy)
    if not candidates:
        ctx.say("measure: no configuration reached the target: nothing to hand over")
        return
    target, tried, missed, lengths = ctx.objective.target, [], [], []
    passed_over: list[Lengths] = []  # longer runs a sooner candidate went before
    for i, best in enumerate(candidates):  # the next only where the one before missed
        if tried and (why_not := told.not_worth(best, (ctx.baseline or {}).get("train_time_s"))):
            ctx.say(f"measure: not measured: {why_not}")
            continue
        this = Lengths.of(ctx, best)
        lengths.append(this)
        rest, ruled_out = candidates[i + 1:], _ruled_out(ctx, this, missed)
        late = told.shortfall(lengths)  # the race's times, as measured so far
        if ruled_out is None and (waiting := _waiting(passed_over, best, late)) is not None:
            ctx.say(f"measure: {waiting.lengths[0]} epochs of {waiting.best.trial_id} before "
                    f"{best.trial_id}: {waiting.per_chance_s():.1f} s per chance against "
                    f"{told.late_per_chance(best, late):.1f} s{told.said(best, late)}")
            if _measure(ctx, strategy, waiting, tried,
                        lambda: _sooner(ctx, waiting, candidates[i:], missed, lengths)):
                break
            if (miss := waiting.miss()) is not None:
                missed.append(miss)
            ruled_out = _ruled_out(ctx, this, missed)
        if ruled_out is not None:
            chosen = best.knobs | best.picks
            keys = [k for k in chosen if k != "epochs"]
            ctx.say(f"measure: not {_shown(chosen, keys)}: it learns no more "
                    f"than {_shown(ruled_out[0], keys)}, measured {ruled_out[1]:.4f} short")
            continue
        if _measure(ctx, strategy, this, tried,
                    lambda: _sooner(ctx, this, rest, missed, lengths)):
            break
        if this.lengths:
            passed_over.append(this)
        if (miss := this.miss()) is not None:
            missed.append(miss)
    if not _reached(tried):  # the longer runs passed over for what missed too, in order
        for this in passed_over:
            if _measure(ctx, strategy, this, tried, lambda: None):
                break
    if not _reached(tried) and (last := _last_resort(ctx, lengths)) is not None:
        ctx.say(f"measure: nothing else left: {last.best.trial_id} at its plan, "
                f"{last.lengths[0]} epochs, the least short ({last.miss()[1]:.4f})")
        _measure(ctx, strategy, last, tried, lambda: None)
    # The longest run that reached, where one on the line was lengthened and the longer missed.
    (answer,), margin = _reached(tried)[-1:] or tried[-1:], _margin(ctx)
    owner = next((t for t in lengths if any(r is answer for r in t.runs)), None)
    answer = _shorter(ctx, strategy, owner, answer, tried, margin) if owner else answer
    holds = answer["reached"] and answer["best_score"] >= target + margin
    answer = {**answer, "attempts": tried, "hold_margin": margin, "holds": holds}
    ctx.folder.measured.write_text(json.dumps(answer, indent=2, default=str))


def _reached(tried: list[dict]) -> list[dict]:
    return [t for t in tried if t["reached"]]


@dataclass
class Lengths:
    """A configuration's lengths still to measure (shortest first) and its runs so far."""
    best: TrialRecord
    planned: int
    lengths: list[int]
    runs: list[dict] = field(default_factory=list)
    holding: bool = False
    """A run reached the target on the line: the next lengths, to `hold_to`, tell if it holds."""
    hold_to: int = 0
    """The last length trained to hold: the one a miss would have been lengthened to."""
    given_up: list[int] = field(default_factory=list)
    """The lengths left where a lengthening stopped paying (`_last_resort`'s)."""
    points: int = MEASURE_POINTS
    """About how many times each run validates (`validation_cadence`)."""
    target: float = math.inf
    noise: float | None = None
    """A retrain's noise (`lengths.retrain_noise`): how sure its next length is to reach."""

    @classmethod
    def of(cls, ctx: StageContext, rec: TrialRecord) -> Lengths:
        """`rec`'s lengths to measure (`attempts`), none measured yet."""
        planned = int({**ctx.prepared.base, **rec.knobs}.get("epochs") or ctx.spec.epochs)
        first = epochs_needed(rec, ctx.objective.target, planned)
        # A quarter at a time only where the next goes on from the first run's decay (at 8
        # unet3d epochs quarters 3, 4, 5, 7, 8 each went on from the race's epoch 2).
        branches = decay_epoch(exported(ctx, rec, first)) > rec.epochs
        return cls(rec, planned, attempts(first, planned, branches), target=ctx.objective.target,
                   noise=retrain_noise((ctx.baseline or {}).get("curve") or []))

    def miss(self) -> tuple[dict, float, float] | None:
        """(its configuration, how far its best run ended short, the share of its plan its
        longest run trained); None before a run that validated."""
        scores = [r["best_score"] for r in self.runs if r.get("best_score") is not None]
        if not scores:
            return None
        last = self.runs[-1]
        return last["config"], self.target - max(scores), self.share(last["epochs"])

    def share(self, epochs: int) -> float:
        """`epochs` as a share of its plan (the race plans a larger batch for more epochs)."""
        return int(epochs) / max(1, self.planned)

    def next_s(self, epochs: int | None = None) -> float | None:
        """Its next length's (or `epochs`') training time at the pace of its last run; None
        where that run has no pace (it failed)."""
        spent = self.runs[-1].get("train_time_s")
        if spent is None or not math.isfinite(float(spent)):
            return None
        return float(spent) / max(1, int(self.runs[-1]["epochs"])) * (epochs or self.lengths[0])

    def per_chance_s(self) -> float | None:
        """`next_s` per chance of reaching the target (`lengths.lengthening_chance`): how it
        is set beside the candidates, each per its own chance (`told.late_per_chance`)."""
        spent = self.next_s()
        chance = lengthening_chance(self.runs, self.lengths[0], self.target, self.noise)
        return None if spent is None else per_chance(spent, chance)


def _measure(ctx: StageContext, strategy, this: Lengths, tried: list[dict], sooner) -> bool:
    """Measure `this` at its lengths, shortest first, until one reaches the target (True), a
    lengthening stops paying, or `sooner()` names a candidate expected at the target before
    its next length (the rest of its lengths are kept). One on the line is lengthened to hold
    (`_on_the_line`)."""
    target = ctx.objective.target
    while this.lengths:
        epochs, runs = this.lengths[0], this.runs
        # Once a run reached the target on the line, the next ones only tell whether it holds.
        if not this.holding and (why := why_not_longer(runs, target, len(this.lengths))):
            ctx.say(f"measure: not {epochs} epochs: {why}")
            this.given_up, this.lengths = this.lengths, []
            return False
        if (why := sooner() if runs and not this.holding else None) is not None:
            ctx.say(f"measure: {epochs} epochs of it only after {why}")
            return False
        this.lengths.pop(0)
        config = exported(ctx, this.best, epochs)
        measured = strategy.known_measurement(ctx, config) or \
            as_confirmed(ctx, this.best, config, this.planned) or \
            _train(ctx, config, this.best, runs, this.points)
        runs.append(measured)
        tried.append(measured)
        ctx.say(describe(measured, target, ctx.search_id))
        if this.holding:
            if not this.lengths or this.lengths[0] > this.hold_to or _beyond(ctx, measured):
                return _reached(runs) != []
        elif measured["reached"] and not _on_the_line(ctx, this):
            return True
    return False


def _shorter(ctx: StageContext, strategy, this: Lengths, answer: dict, tried: list,
             margin: float) -> dict:
    """The answer, or a shorter run of it: where `answer` first reached the target
    `MIDDLE_SHORTER` of its epochs or more before its end, and beyond `margin`, a run planned
    for that epoch (it anneals by then) is measured once, and handed over where it reaches the
    target beyond the noise too."""
    target, epochs = ctx.objective.target, int(answer["epochs"])
    first = first_at(answer.get("curve") or [], target)
    if first is None or answer["best_score"] < target + margin or \
            epochs - first.epoch < MIDDLE_SHORTER * epochs or \
            any(int(r["epochs"]) >= first.epoch for r in this.runs if r is not answer):
        return answer
    ctx.say(f"measure: {epochs} epochs reached the target at epoch {first.epoch}, "
            f"{epochs - first.epoch} before the end: {first.epoch} epochs next")
    shorter = Lengths(this.best, this.planned, [first.epoch], points=SHORTER_POINTS)
    _measure(ctx, strategy, shorter, tried, lambda: None)
    run = shorter.runs[-1]
    return run if run["reached"] and run["best_score"] >= target + margin else answer


def _on_the_line(ctx: StageContext, this: Lengths) -> bool:
    """`this`'s last run reached the target by less than `hold_margin`: it is trained where
    its curve makes up the margin (`holding_length`), then at its next length, to hold."""
    margin, target, last = _margin(ctx), ctx.objective.target, this.runs[-1]
    above, epochs = last["best_score"] - target, int(last["epochs"])
    this.holding = above < margin and bool(this.lengths)
    if this.holding:
        hold = to_hold(this.lengths, (ctx.baseline or {}).get("curve") or [], epochs,
                       this.planned, above, margin, target)
        this.lengths[:1], this.hold_to = hold, hold[-1]
        ctx.say(f"measure: {epochs} epochs ended {above:.4f} above the target, within a "
                f"retrain's noise ({margin:.4f}): another seed may miss it; "
                f"{' then '.join(map(str, hold))} epochs next, until one ends beyond it")
    return this.holding


def _beyond(ctx: StageContext, run: dict) -> bool:
    return run["reached"] and run["best_score"] >= ctx.objective.target + _margin(ctx)


def _margin(ctx: StageContext) -> float:
    return hold_margin((ctx.baseline or {}).get("curve") or [],
                       getattr(ctx.objective, "tolerance", None))


def _ruled_out(ctx: StageContext, this: Lengths, missed: list) -> tuple[dict, float] | None:
    """The measured miss that rules `this` out, if any: one it learns no more than, at as large
    a share of its plan or larger (further along its plan, a larger batch may learn more)."""
    first, share = exported(ctx, this.best, this.lengths[0]), this.share(this.lengths[0])
    return next(((m, gap) for m, gap, trained in missed
                 if share <= trained and learns_no_more(first, m, gap)), None)


def _sooner(ctx: StageContext, this: Lengths, rest: list[TrialRecord], missed: list,
            measured: list[Lengths]) -> str | None:
    """What goes before `this` at its next length, as said (None: nothing), each per chance:
    another's longer run, or the next candidate in `rest` that `this`'s misses do not rule out,
    as late as the race's times of what was `measured` ran (orchestrator/told.py)."""
    miss, late = this.miss(), told.shortfall(measured)
    if (next_s := this.per_chance_s()) is None:
        return None
    at = f"{next_s:.1f} s per chance at its pace"
    if (first := _soonest([t for t in measured if t is not this])) and \
            first.per_chance_s() < next_s:
        return (f"{first.lengths[0]} epochs of {first.best.trial_id}: {at}, those "
                f"{first.per_chance_s():.1f} s at theirs")
    rules = [*missed, miss] if miss is not None else missed
    for rec in rest:
        if _ruled_out(ctx, Lengths.of(ctx, rec), rules) is not None:
            continue
        per = told.late_per_chance(rec, late)
        if per is None or per >= next_s:
            return None
        return (f"{rec.trial_id}: {at}, {rec.trial_id} is expected at the target in "
                f"{per:.1f} s per chance of reaching it{told.said(rec, late)}")
    return None


def _last_resort(ctx: StageContext, lengths: list[Lengths]) -> Lengths | None:
    """Where nothing reached the target and nothing is left to measure: the configuration that
    missed least, where a lengthening gave it up, set to train once at its plan (planned to learn
    what the baseline's run does), where that ends before the baseline's run would."""
    if not (left := [t for t in lengths if t.given_up and t.miss() is not None]):
        return None
    last = min(left, key=lambda t: t.miss()[1])
    spent = last.next_s(last.given_up[-1])
    if spent is not None and spent < float((ctx.baseline or {}).get("train_time_s") or math.inf):
        last.lengths, last.holding = last.given_up[-1:], True  # one run, whatever it moves
        return last
    return None


def _waiting(passed_over: list[Lengths], rec: TrialRecord, late: float) -> Lengths | None:
    """The longer run passed over that goes before `rec`: the soonest per chance, where that
    is sooner than `rec`'s, `late` times the race's (docs/screen.md)."""
    first, per = _soonest(passed_over), told.late_per_chance(rec, late)
    return first if first and per is not None and first.per_chance_s() < per else None


def _soonest(measured: list[Lengths]) -> Lengths | None:
    """Of `measured`, the one whose next length is soonest per chance (None: none left)."""
    return min([t for t in measured if t.lengths and t.runs and t.next_s() is not None],
               key=Lengths.per_chance_s, default=None)


def _shown(config: dict, keys: list[str]) -> str:
    """`config`'s values of `keys`, as the stage prints them."""
    return " ".join(f"{k}={config.get(k)}" for k in keys)


def read(ctx: StageContext) -> dict | None:
    """What the measure stage measured (a resumed search reads it back)."""
    return json.loads(ctx.folder.measured.read_text()) if ctx.folder.measured.is_file() else None


def _train(ctx: StageContext, config: dict, winner_rec: TrialRecord,
           runs: list[dict] | None = None, points: int = MEASURE_POINTS) -> dict:
    """Train `config` once, to its end (no stopper: its whole run is the measurement), going on
    from the furthest of `runs` (its shorter runs measured before) or the race's winner whose
    first epochs it shares; validated about `points` times."""
    base = {**config, **validation_gate(ctx.baseline, ctx.objective.target),
            **validation_cadence(config, points)}
    if (keep := decay_epoch(config)) > 0:  # a longer run may go on from there
        base["checkpoint_every"] = keep
    start, *went_on_from = going_on_from(winner_rec, runs or [])
    shown = {k: config[k] for k in [*winner_rec.knobs, *winner_rec.picks, "epochs"]
             if k in config}
    done = [r for r in ctx.book.finished(Role.MEASURED) if r.knobs == shown]
    if not done:  # (a resumed search whose measured run ended before the stage was recorded)
        # The race's winner stopped inside the stretch its schedule shares with this run's
        # (trainables/loop/resume.py): its checkpoint is this run's first epochs.
        trial_ctx = ctx.trial_context(base, ctx.objective, profile=(), time_start=True,
                                      start_from=start)
        ctx.book.begin(Role.MEASURED, 1, int(config["epochs"]), base=base)
        ctx.fit(TuneRun(trainable(trial_ctx, ctx.datasets()), shown, num_samples=1,
                        max_concurrent=1,
                        reuse_actors=reuse_actors([int(config.get("workers", 1))],
                                                  ctx.spec.always_use_worker_group)))
        done = [r for r in ctx.book.finished(Role.MEASURED) if r.knobs == shown]
    rec = done[-1]
    measured = measurement(ctx, rec, config, winner_rec, went_on_from)
    if keep > 0 and rec.checkpoint and traits(rec.status).rankable:
        measured |= {"decay_checkpoint": rec.checkpoint, "decay_epoch": keep}
    return measured
