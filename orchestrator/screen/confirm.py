"""The confirm stage: train the fastest predicted to the baseline's accuracy, each stopped once
decided, until the next prediction cannot beat what was measured.

What earlier searches on the same workload, data and machine kind settled is not trained again
(orchestrator/screen/knowledge.py): a confirmation that reached this target keeps its time, one
that learned too little rules out what learns no more. `Confirmations`, a Ray Tune searcher,
proposes the configurations in order; the stopper (orchestrator/stopper.py) decides each; both
read the search's `Evidence`.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field

from ray.tune.search import Searcher

from orchestrator.evidence import Evidence, learns_no_more, pace_ratio, pairs
from orchestrator.records import Role, TrialRecord
from orchestrator.screen import bets
from orchestrator.screen import predict as predictor
from orchestrator.screen.knowledge import Knowledge
from orchestrator.screen.race import DECIDE_AT, VALIDATION, RaceRule, horizon
from orchestrator.screen.twins import teach_twins
from orchestrator.stages import StageContext
from orchestrator.stopper import TargetStopper, validation_gate
from orchestrator.tune_runs import TuneRun, trainable
from trainables.config import SPEED_ONLY
from trainables.identity import config_key, learning_key, model_key, model_of, run_key
from trainables.status import TrialStatus, traits
from trainables.trial.trainable import reuse_actors

# A (calibrated) prediction may be this much too fast: a candidate predicted at most 1/SLACK
# times a measured time to the target is still worth confirming, where the race can tell by
# SLACK times that time (`Confirmations`).
SLACK = 0.75


class Confirmations(Searcher):
    """Proposes given configurations (the predict stage's, fastest predicted first) and stops
    once none left, allowing for prediction error (`slack`), can beat the fastest time to the
    target known (the evidence's `best_expected`): measured, or expected by the race of a
    decided contender likely to reach it. Not its pessimistic bound: at a quarter of a plan
    that was 1.4-3.2x its expected time on unet3d, so a candidate predicted 30% slower than the
    expected best was still confirmed, and could only lose.

    A miss teaches something: a trial that fell behind the baseline's learning curve, or ended
    below the target, or that the race decided as unlikely to reach it (a miss by what it is
    expected to end short), rules out every configuration that learns no more than it did: the same
    model (trainables/identity.model_of: width, patch, lr, ...) at as many samples per step or
    more (a bigger batch learns less per sample) and at as few mantissa bits or fewer, or at
    any precision when it fell short by more than a precision costs (orchestrator/evidence.py
    `PRECISION_COST`). The
    same model at a smaller batch, or at a finer precision after a near miss, may still reach
    the target, so it is not ruled out, only tried after every model and precision not yet
    tried (a confirmation budget spent on one model that cannot learn enough answers nothing),
    the one that fell least short first.
    A miss also casts doubt on each value of its model's knobs (`Evidence.doubts`), so a model
    with fewer doubted values is tried first. Until a decided contender is sure to reach the
    target (`Evidence.hedged`), a model not yet decided goes before another batch or
    precision of one that was, and is worth racing where it beats the decided ones' time per
    chance of reaching (`Evidence.best_per_chance`): contenders of one model share its fate. The predictions rank candidates by speed alone and
    the fastest share the thinnest model and the smallest patch: without this, every
    confirmation of a small budget went to models that could not reach the target (unet3d,
    docs/benchmarks.md). The baseline's values are never doubted: it reached the target.
    A configuration that trains the same run (trainables/identity.run_key) as one already
    proposed, or as one that reached the target in an earlier search, is not proposed: the
    screen has timed both (the faster, predicted first, is the one proposed).
    Predictions are calibrated by what was measured: every prediction is scaled by the median
    of the confirmations' measured / predicted times (`Evidence.calibration`: to the target
    where one reached it, its pace where the race decided it) before the comparison. A few
    steps miss what a whole run pays per epoch (validation, the epoch's host sync, launches on
    a GPU), so predictions run short by a similar factor for every candidate, and an
    uncalibrated bar would confirm candidates that cannot win.

    A candidate predicted slower than the bar (within the slack) is a bet that its prediction
    is too slow. Where the bar is a time measured, the bet is made only where the race settles
    it cheaply: where `judged`, the time by which the race decides it at the latest
    (race.DECIDE_AT of the share of its plan the race reads, `race.horizon`, at its predicted
    pace, calibrated), comes by SLACK of the bar. Else a lost bet costs the bar itself: the
    stopper cuts a contender once it has trained as long as the best took to the target. At
    128 unet3d epochs the baseline reached the target a quarter into its schedule, and while
    the race decided by a quarter of every plan, every contender was predicted there too, at
    the race's decision point: two of three such bets cost 55 and 67 s of a 161-s search and
    lost; the third won by 4% for 32 s (docs/benchmarks.md). Now the race decides halfway to
    the target there as where the baseline reached it halfway or later (unet3d 8 and 32, the
    classifier at 15): by half a prediction, and every bet stands (at 128 epochs each
    search's fourth confirmation now went to batch 2). Against a decided contender's expected
    time every bet stands too: no stopper cuts there, and that bar is uncertain itself (11-44
    s around 15 s at 128 epochs; held to it, a search confirmed 2 width-0.5 contenders and
    none of width 1.0, and handed over a 6.2x answer where the others found 9.6-15.8x).
    `judged` None: no race (a full confirmation runs each to the target or the bar), and
    every bet stands as before.

    In the race, once an answer is secured (`Evidence.secured`), a bet, and a candidate
    predicted sooner than the best too, is also made only where it pays (orchestrator/screen/
    bets.py): what it may save a run, where it reaches the target (`Evidence.raced_reach`), over
    `runs` (the best time so far -> the runs a saving counts over: the user's, or the search's
    own payback) is at least what deciding it costs. `runs` None: every bet the rules above let
    stand is made. What was left as a bet that would not pay is `declined` (index -> why),
    for the stage to say."""

    def __init__(self, configs: list[dict], predicted: list[float], evidence: Evidence,
                 slack: float = SLACK, judged: list[float] | None = None,
                 runs: Callable[[float], float] | None = None):
        super().__init__()
        self.runs = runs
        self.declined: dict[int, str] = {}
        self.configs, self.predicted = list(configs), list(predicted)
        self.evidence, self.slack = evidence, slack
        self.judged = list(judged) if judged is not None else None
        models = [model_of(c) for c in self.configs]
        self.varied = {k for k in set().union(*models)
                       if len({repr(m.get(k)) for m in models}) > 1}
        self.left = list(range(len(self.configs)))  # not proposed yet, fastest predicted first
        self.proposed: dict[str, dict] = {}  # trial id -> its configuration

    def suggest(self, trial_id: str):
        i = self.next_index()
        if i is None:
            return Searcher.FINISHED  # the rest are predicted slower than a time measured
        self.left.remove(i)
        self.proposed[trial_id] = dict(self.configs[i])
        self.evidence.expect(trial_id, self.predicted[i], self.configs[i])
        return dict(self.configs[i])

    def next_index(self) -> int | None:
        """The configuration to propose next (None: none left can win). Proposes nothing; it
        only drops from `left` what a miss or a proposal already rules out."""
        shortfalls = self.evidence.shortfalls()
        self.left = [i for i in self.left if not self._same_run(self.configs[i]) and
                     not any(learns_no_more(self.configs[i], m, gap) for m, gap in shortfalls)]
        short: dict[str, float] = {}  # model -> the least it fell short by
        for config, gap in shortfalls:
            short[learning_key(config)] = min(short.get(learning_key(config), math.inf), gap)
        doubted, hedged = self.evidence.doubts(self.varied), self.evidence.hedged()
        # Stable: within a rank, fastest predicted first.
        order = sorted(self.left, key=lambda i: (
            len(pairs(self.configs[i], self.varied) & doubted),
            model_key(self.configs[i]) in hedged,
            short.get(learning_key(self.configs[i]), -1.0)))
        best, scale = self.evidence.best_expected(), self.evidence.calibration()
        # While it hedges, another model can win where the decided may all miss: per chance.
        other = self.evidence.best_per_chance() if hedged else None
        return next((i for i in order if best is None or self._worth(
            i, other if other is not None and model_key(self.configs[i]) not in hedged
            else best, scale)), None)

    def _worth(self, i: int, best: float, scale: float) -> bool:
        """Candidate `i` can beat `best`: predicted to, or (the bet) within the slack where the
        race tells by SLACK of `best` whether it does. One whose twin the race decided is
        expected where its twin is, at its own pace (`Evidence.twin_expected`; at a finer
        precision, as much sooner as one has been): what it learns is known, and its pace the
        screen timed, so no bet is left to make."""
        twin = self.evidence.twin_expected(self.configs[i], self.predicted[i])
        if twin is not None:
            return twin < best
        predicted = self.predicted[i] * scale
        if predicted <= best:  # once an answer is in hand, it too must pay (`_pays`)
            return self.judged is None or self._pays(i, best, predicted, self.judged[i] * scale)
        if predicted * self.slack > best:
            return False
        # Where the bar is a decided contender's expected time, not a time measured, no
        # stopper cuts at it, and the bar is itself uncertain: the bet stands.
        measured = self.evidence.best_s
        if self.judged is None:
            return True
        if measured is not None and best >= measured and \
                self.judged[i] * scale > self.slack * best:
            return False
        return self._pays(i, best, predicted, self.judged[i] * scale)

    def _pays(self, i: int, best: float, predicted: float, cost: float) -> bool:
        """The bet on candidate `i` pays back what deciding it costs (bets.py), or no answer is
        secured yet: then it is also the fallback where the decided ones all miss. Predicted
        faster than the best or not: the prediction holds the pace, not what the candidate's
        model learns, and one predicted 33% sooner than a contender decided 0.88 likely was
        decided 22% later, 0.55 likely (unet3d at 32 epochs, 2026-12-07, seed 0). At 60
        classifier epochs (2026-12-07, seed 2) the decided were 0.33-0.63 likely to reach the
        target; weighed as a bet alone, bf16 batch 64 at width 1 (seed 0's answer) was not
        raced, and the decided all missed: no answer for 1.45 runs."""
        if self.runs is None or not self.evidence.secured():
            return True
        runs, reach = self.runs(best), self.evidence.raced_reach()
        if bets.pays(best, predicted, cost, runs, reach):
            self.declined.pop(i, None)
            return True
        self.declined[i] = (f"predicted at {predicted:.1f} s against {best:.1f} s, it saves "
                            f"{bets.saving(best, predicted):.2f} s a run where it reaches the "
                            f"target ({reach:.2f} likely), {runs:.1f} runs to repay {cost:.1f} s")
        return False

    def _same_run(self, config: dict) -> bool:
        """It trains what a proposed configuration, or one known to reach the target, trains."""
        return any(run_key(c) == run_key(config)
                   for c in [*self.proposed.values(), *self.evidence.reached_configs()])

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass  # what a confirmation measured reaches the evidence through the stopper

    # Tune pickles its searcher with the run's state. `runs` reads the driver's clock (the
    # search itself, which holds its output stream: not picklable); a restored searcher is
    # rebuilt by its stage with its own.
    def __getstate__(self) -> dict:
        return {**self.__dict__, "runs": None}

    # Tune saves its searcher with the run's state. What is saved is where the queue stands;
    # the evidence is the search's own, not saved twice.
    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"left": self.left, "proposed": self.proposed}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        self.left, self.proposed = state["left"], state["proposed"]


@dataclass
class Settled:
    """What the confirm stage starts from: configurations earlier searches (or this one, before
    a stop) already settled for this target, and the predictions still to confirm."""

    todo: list[predictor.Prediction] = field(default_factory=list)
    earlier: list[TrialRecord] = field(default_factory=list)
    """Confirmed results of earlier searches this one reuses (leaderboard rows)."""
    settled: int = 0
    """Configurations earlier searches settled for this target: confirmations of the budget."""
    skipped: int = 0


def settle(predictions: list[predictor.Prediction], knowledge: Knowledge, evidence: Evidence,
           target: float, own: str, knobs_of) -> Settled:
    """Split the predictions faster than the baseline into those an earlier search settled for
    `target` on this machine kind (taught to `evidence`) and those to confirm."""
    out, seen = Settled(), set()
    for pred in predictions:
        if not pred.predicted_speedup > 1.0:
            continue  # predicted no faster than the baseline: not worth a trial
        earlier = knowledge.confirmed({**pred.trial_config, **knobs_of(pred)}, target,
                                      besides=own)
        if earlier is None:
            out.todo.append(pred)
            continue
        if id(earlier) in seen:
            continue  # another switch variant of a run already settled: one row, one count
        seen.add(id(earlier))
        out.settled += 1
        teach_twins(evidence, earlier["knobs"], earlier.get("curve"), target, earlier["status"])
        if earlier.get("expected_s") is not None:  # an earlier race decided it
            knobs = {k: earlier["knobs"][k] for k in knobs_of(pred) if k in earlier["knobs"]}
            out.earlier.append(earlier_record(earlier, knobs))
            evidence.earlier_expected(knobs, earlier.get("expected_high_s") or math.inf,
                                      float(earlier.get("expected_reach") or 1.0),
                                      earlier["expected_s"], pace_ratio(
                                          earlier.get("expected_paced_s"),
                                          pred.predicted_time_s), pred.predicted_time_s)
        elif earlier.get("time_to_target_s") is not None:
            # As it ran: the same run, but the switches are the earlier trial's.
            knobs = {k: earlier["knobs"][k] for k in knobs_of(pred) if k in earlier["knobs"]}
            out.earlier.append(earlier_record(earlier, knobs))
            ratio = earlier["time_to_target_s"] / pred.predicted_time_s \
                if pred.predicted_time_s > 0 else None
            evidence.earlier_reached(knobs, earlier["time_to_target_s"], ratio)
        else:
            out.skipped += 1  # failed, or could not reach this target: never retried here
            if earlier.get("short_by") is not None:  # it learned too little: so do others
                evidence.earlier_missed(knobs_of(pred), earlier["short_by"])
    return out


def teach_finished(evidence: Evidence, done: list[TrialRecord], target: float) -> None:
    """What this search's confirmations that ended before a stop measured counts as it did
    live: the fastest time to the target, the misses that rule out others, the calibration."""
    for rec in done:
        teach_twins(evidence, rec.knobs, rec.curve, target, rec.status)
        if rec.short_by is not None:
            evidence.earlier_missed(rec.knobs, rec.short_by)
        if rec.status == TrialStatus.DECIDED and rec.expected_s is not None:
            predicted = (rec.prediction or {}).get("predicted_time_s")
            evidence.earlier_expected(rec.knobs, rec.metrics.get("expected_high_s", math.inf),
                                      rec.reach, rec.expected_s, pace_ratio(
                                          rec.metrics.get("expected_paced_s"), predicted),
                                      predicted)
        if rec.reached and traits(rec.status).rankable:
            predicted = (rec.prediction or {}).get("predicted_time_s")
            evidence.earlier_reached(rec.knobs, rec.time_to_target_s,
                                     rec.time_to_target_s / predicted if predicted else None)


def run_confirmations(ctx: StageContext, todo: list[predictor.Prediction], planned: int,
                      knobs_of, profile: tuple[str, ...]) -> None:
    """Train at most `planned` of `todo`, fastest predicted first, each to its decision."""
    # A candidate whose switches the screen did not time (it times them only for the few
    # predicted fastest, and confirm may go past those) picks them as a `tune` trial does, by
    # timing a few steps at its start; one that was timed keeps its value. Each skips the
    # validations that cannot decide it (trainables/loop/fit.validates); in the race, its
    # curve needs points from early on: it validates every epoch (`race.VALIDATION`).
    race = ctx.spec.confirm == "race"
    target = ctx.objective.target
    share = horizon(ctx.baseline, target)  # of a plan, what the race reads (race.horizon)
    base = {**ctx.prepared.base, **(VALIDATION if race else
                                    validation_gate(ctx.baseline, target))}
    trial_ctx = ctx.trial_context(base, ctx.objective, profile, time_start=True)
    rules = (RaceRule(ctx.baseline, target, ctx.evidence),) if race else ()
    stopper = TargetStopper(ctx.objective, ctx.evidence, curve=ctx.baseline.get("curve"),
                            rules=rules)
    ctx.book.begin(Role.TRIAL, ctx.spec.num_trials, ctx.spec.epochs, base=base, predictions={
        config_key(knobs_of(p)): p.to_dict() for p in todo})
    runs = bets.runs_to_repay(ctx.spec.runs_ahead, ctx.spent,
                              (ctx.baseline or {}).get("train_time_s")) if race else None
    searcher = Confirmations([knobs_of(p) for p in todo], [p.predicted_time_s for p in todo],
                             ctx.evidence, judged=[judged_at(p, share) for p in todo]
                             if race else None, runs=runs)
    if searcher.next_index() is None:
        # Nothing left is predicted to beat what was measured: no Tune run to start (one that
        # ends before its first trial races Tune's own saving of its state).
        best = ctx.evidence.best_expected()
        why = "every one is ruled out by a miss" if best is None else \
            f"none is predicted to beat {best:.1f} s to the target"
        ctx.say(f"confirm: nothing to confirm: {why}")
        return
    workers = [int(p.config.get("workers", 1)) for p in todo]
    ctx.fit(TuneRun(trainable(trial_ctx, ctx.datasets()), {}, num_samples=planned,
                    max_concurrent=ctx.prepared.plan.max_concurrent_trials,
                    reuse_actors=reuse_actors(workers, ctx.spec.always_use_worker_group),
                    searcher=searcher, stopper=stopper, time_budget_s=ctx.spec.time_budget_s))
    for i, why in searcher.declined.items():
        if i in searcher.left:
            shown = " ".join(f"{k}={v}" for k, v in searcher.configs[i].items())
            ctx.say(f"confirm: not raced, a bet that would not pay: {shown} ({why})")


def judged_at(pred: predictor.Prediction, share: float = 1.0) -> float:
    """Seconds of training by which the race decides `pred` at the latest: DECIDE_AT of the
    `share` of its plan the race reads (race.horizon), at its predicted pace (it may cut it
    sooner, from RUNG on, where it cannot win)."""
    per_epoch = pred.predicted_time_s / max(1, pred.predicted_epochs)
    return DECIDE_AT * share * pred.planned_epochs * per_epoch


def earlier_record(entry: dict, knobs: dict) -> TrialRecord:
    """An earlier search's confirmed (or, by a race, decided) result, as a leaderboard row of
    this one: this search's `knobs`, and the speed switches the earlier trial ran with that they
    leave out as its picks. It is handed over as it ran: a search with twice the budget matched a
    decided contender that ran channels_last to a prediction leaving the switch to the profile,
    handed it over without it, and so measured another run than the one measured before: 13
    epochs where that one reached the target in 10 (2.05x where it was 3.93x, docs/
    benchmarks.md, 2026-12-05)."""
    ran = {k: v for k, v in (entry.get("knobs") or {}).items()
           if k in SPEED_ONLY and k not in knobs}
    if entry.get("time_to_target_s") is None:  # decided: its expected time, not measured
        metrics = {"expected_time_to_target_s": entry["expected_s"],
                   "expected_high_s": entry.get("expected_high_s") or float("nan"),
                   "expected_epoch": float(entry.get("expected_epoch") or 0),
                   "expected_reach": float(entry.get("expected_reach") or 1.0),
                   "val_score": entry.get("val_score") or float("nan"), "objective": -1e6}
    else:
        metrics = {"time_to_target_s": entry["time_to_target_s"],
                   "train_time_s": entry["time_to_target_s"],
                   "val_score": entry.get("val_score") or float("nan"),
                   "objective": -entry["time_to_target_s"]}
    return TrialRecord(entry.get("trial_id", "earlier"), 0, knobs, 0.0, 0.0,
                       TrialStatus(entry["status"]), reason=f"confirmed by {entry['search']}",
                       metrics=metrics, role=Role.EARLIER, curve=entry.get("curve") or [],
                       epochs=int(entry.get("epochs") or 0),
                       picks={**ran, **(entry.get("picks") or {})})

