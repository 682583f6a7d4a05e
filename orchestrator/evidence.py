"""What a search knows from the trials decided so far: one record, read by every decision.

The stopper (orchestrator/stopper.py) cuts trials, the confirmations (orchestrator/screen/
confirm.py) choose the next one, the trial book (orchestrator/trial_book.py) journals why each
ended. All three read one `Evidence`; it changes only through its named methods (`reached`,
`missed`, `stopped`, `earlier_reached`, ...), never by writing its fields from outside, so a
live search, a resumed one and one that learns from earlier searches agree on what is known.

    best so far   the fastest time to the target any trial (or earlier search) reached,
                  or (the race) a decided contender likely to reach it reaches it by; and
                  the fastest expected: what a candidate not yet trained must beat
    reached       trials that reached the target, their time to it and their configuration
    missed        trials that learned too little, and by how much they fell short
    stopped       the status and reason of each trial a decision ended
    twins         the earliest epoch each run can reach the target at, by its decided twins
    doubts        the model values (width 0.5, patch 16) that missed, or that the race
                  expects to end short, and never reached
    calibration   measured over predicted time to the target, of what reached it, and the
                  race's contenders' measured pace over the predicted one

Twins are configurations that train the same run but for their precision and speed switches
(trainables/identity.twin_key): the same model, batch, lr and schedule, so their learning
curves agree epoch for epoch up to rounding (unet3d's bf16 and fp32 runs of one model and batch
reached the target an epoch apart, docs/benchmarks.md). Once one twin is decided (it reached the
target at epoch E, or had not by the epoch k it was cut at), another's time to the target is
known after two of its epochs: E - TWIN_MARGIN (or k + 1 - TWIN_MARGIN) epochs at its own
measured pace. On unet3d an fp32 twin of a bf16 run that reached the target was otherwise
trained 9-11 s (a third of a baseline run) to learn what its second epoch showed. Where the race
decided a twin, one at no finer a precision is expected where it is, at its own pace, and is not
raced where that cannot win (`twin_expected`): a bf16 twin of an fp32 contender decided at
22.4 s, timed by the screen at the same pace, was raced 10.7 s to be decided at 22.5 s. One at a
finer precision may learn more, so it is expected as much sooner as a finer twin has been
(`FINER_GAIN`): an fp32 twin of a bf16 contender decided at 17.1 s, 1.22x slower a step, was
raced 11.4 s to be decided at 21.5 s.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from trainables.config import MANTISSA_BITS, samples_per_step
from trainables.identity import model_key, model_of, twin_key
from trainables.status import TrialStatus

# Twins' curves differ by rounding: one may reach the target this many epochs before the other.
TWIN_MARGIN = 1
# A contender the race decided with a lesser chance to reach the target than this is expected to
# end short of it (its expected ratio does not get there): it bounds no other's time, and its
# model's values are doubted as a miss's are. Deciding by 25% of a schedule, the classifier's
# width-0.5 contenders were decided at 0.27-0.46 and every one ended 4-7 points short; untaught,
# all four confirmations of three searches went to that model (docs/benchmarks.md).
LIKELY = 0.5
# A contender decided at least this likely to reach the target is taken at its word; below it,
# the next confirmations hedge (`hedged`). Of the contenders the long-jobs searches decided and
# then measured (unet3d at 8-128 epochs, 2026-12-02 to 12-06), 10 of 11 decided 0.8 likely or
# more reached the target, but 9 of 27 decided at 0.5-0.8: of 17 width-0.5 patch-16 ones
# decided 0.51-0.78 likely, 1 did, and a search that raced that model four times, at four
# batches and precisions, handed nothing over (docs/benchmarks.md).
SURE = 0.8
# What a finer precision can give back: bf16's 8-bit mantissa cost the classifier about a point
# of accuracy against fp32 (docs/benchmarks.md). A miss by more is the model's, not its
# precision's: on unet3d an fp32 run fell short by 3.3 points where its bf16 twin had by 3.2.
PRECISION_COST = 0.01
# How much sooner than its decided coarser twin (at its own pace) a finer-precision twin may
# reach the target. Of the 8 fp32 contenders the long-jobs searches raced after their bf16 twin
# was decided (unet3d at 16, 32 and 128 epochs, 2026-12-06), the race decided them at 0.87-1.29
# of the twin's expected time at their pace (median 1.03): the soonest, 0.87, is this allowance,
# rounded down; the fp32 one at 0.89 was the search's answer, and it is still raced.
FINER_GAIN = 0.85


class Evidence:
    """What decided trials say; empty at first, taught as the search goes."""

    def __init__(self) -> None:
        self._best_s: float | None = None
        self._reached: dict[str, tuple[float, dict]] = {}
        self._missed: dict[str, tuple[float, dict]] = {}
        self._stopped: dict[str, tuple[TrialStatus, str]] = {}
        self._twins: dict[str, tuple[int, str]] = {}
        self._baseline: list[dict] = []
        self._held: list[dict] = []  # earlier searches' configurations that reached it
        self._earlier_hits = 0  # of them, those measured there (not decided by a race)
        self._earlier_missed: list[tuple[dict, float]] = []
        self._expected: dict[str, float] = {}  # trial -> its predicted time to the target
        self._configs: dict[str, dict] = {}  # trial -> its configuration, as proposed
        self._told: dict[str, tuple[float, float, float, int, float, float]] = {}  # the race's
        # earlier decided contenders likely to reach it: (latest, expected, chance to reach)
        self._earlier_told: list[tuple[float, float, float]] = []
        self._earlier_decided: list[tuple[dict, float]] = []  # (configuration, chance)
        # decided, but expected to end short of the target: (configuration, by how much)
        self._unlikely: list[tuple[dict, float]] = []
        self._ratios: list[float] = []  # measured / predicted of earlier searches' results
        # earlier decided contenders likely to reach it: (configuration, expected s, predicted s)
        self._earlier_twins: list[tuple[dict, float, float]] = []

    # -- what trials say -------------------------------------------------------------------
    def baseline_reached(self, config: dict[str, Any]) -> None:
        """The baseline's configuration, every field resolved: it reached the target (the
        target is its score), so its values are never doubted."""
        self._baseline = [dict(config)]

    def reached(self, trial_id: str, seconds: float, config: dict | None = None) -> None:
        """A trial reached the target after `seconds` of training."""
        self._best_s = min(self._best_s if self._best_s is not None else math.inf, seconds)
        self._reached.setdefault(trial_id, (float(seconds), dict(config or {})))

    def missed(self, trial_id: str, short_by: float, config: dict | None = None) -> None:
        """A trial learned too little: it fell `short_by` below the baseline's curve (cut) or
        the target (after all its epochs)."""
        self._missed[trial_id] = (float(short_by), dict(config or {}))

    def stopped(self, trial_id: str, status: TrialStatus, reason: str) -> None:
        """A decision ended the trial, with this status and reason."""
        self._stopped[trial_id] = (status, reason)

    def expect(self, trial_id: str, predicted_s: float, config: dict | None = None) -> None:
        """The time to the target predicted for a trial (calibrates later predictions), and
        the configuration it trains (tells its twins, `twin_expected`)."""
        self._expected[trial_id] = float(predicted_s)
        if config is not None:
            self._configs[trial_id] = dict(config)

    def expected(self, trial_id: str, low_s: float, mid_s: float, high_s: float,
                 epoch: int, reach: float = 1.0, paced_s: float = math.nan) -> None:
        """What a contender's curve tells of its time to the target so far (the race,
        orchestrator/screen/race.py): its bounds, the epoch it is expected to reach the target
        at, how likely it reaches it at all, and its time were it to learn as the baseline
        does, at its measured pace (`paced_s`: calibrates the predictions' pace)."""
        self._told[trial_id] = (low_s, mid_s, high_s, epoch, reach, paced_s)

    def unlikely(self, config: dict, short_by: float = 0.0) -> None:
        """A contender decided with less than a `LIKELY` chance to reach the target, expected
        to end `short_by` below it: it may still be measured, but its model's values are
        doubted (`doubts`), and what learns no more than it is not confirmed (`shortfalls`)."""
        self._unlikely.append((dict(config), max(0.0, float(short_by))))

    def learn_twin(self, config: dict, epoch: int, reached: bool) -> None:
        """A decided trial's run reached the target at `epoch` (`reached`), or had not by it."""
        earliest = epoch - TWIN_MARGIN if reached else epoch + 1 - TWIN_MARGIN
        why = f"a twin reached the target at epoch {epoch}" if reached else \
            f"a twin had not reached the target by epoch {epoch}"
        key = twin_key(config)
        if key not in self._twins or earliest < self._twins[key][0]:
            self._twins[key] = (max(1, earliest), why)

    # -- what earlier searches (or a resumed one's finished trials) say -------------------
    def earlier_reached(self, config: dict, seconds: float, ratio: float | None = None) -> None:
        """A configuration an earlier search confirmed, `seconds` to the target; `ratio`: its
        measured over predicted time."""
        self._best_s = min(self._best_s if self._best_s is not None else math.inf, seconds)
        self._held.append(dict(config))
        self._earlier_hits += 1
        if ratio is not None and ratio > 0:
            self._ratios.append(ratio)

    def earlier_expected(self, config: dict, high_s: float, reach: float = 1.0,
                         mid_s: float = math.inf, pace_ratio: float | None = None,
                         predicted_s: float | None = None) -> None:
        """A contender an earlier search's race decided: it reaches the target by `high_s`,
        expected at `mid_s`, with a `reach` chance (an unlikely one bounds nothing, and is
        doubted); `pace_ratio`: its measured pace over the predicted one; `predicted_s`: its
        time to the target as this search's screen predicts it (tells its twins)."""
        if pace_ratio is not None:  # (`pace_ratio` below: finite and positive, or None)
            self._ratios.append(pace_ratio)
        self._earlier_decided.append((dict(config), float(reach)))
        if reach < LIKELY:
            self.unlikely(config)
            return
        self._held.append(dict(config))
        self._earlier_told.append((float(high_s), float(mid_s), float(reach)))
        if predicted_s is not None and predicted_s > 0 and math.isfinite(mid_s):
            self._earlier_twins.append((dict(config), float(mid_s), float(predicted_s)))

    def earlier_missed(self, config: dict, short_by: float) -> None:
        self._earlier_missed.append((dict(config), float(short_by)))

    # -- reads ---------------------------------------------------------------------------------
    @property
    def best_s(self) -> float | None:
        """The fastest time to the target measured: no trial slower than it can win."""
        return self._best_s

    def best_bound(self, besides: str | None = None) -> float | None:
        """The fastest time to the target known for sure: measured, or a decided contender's
        pessimistic bound (`besides`: a contender's own does not count against it)."""
        told = [t[2] for t in self._decided_likely(besides)]
        bounds = [b for b in [self._best_s, *told, *(t[0] for t in self._earlier_told)]
                  if b is not None]
        return min(bounds) if bounds else None

    def best_expected(self) -> float | None:
        """The fastest time to the target known or expected: measured, or a decided
        contender's expected time (one likely to reach it). A candidate not trained yet must
        beat it: the bound a running contender is cut by (`best_bound`) is its pessimistic
        time, 1.4-3.2x its expected one at a quarter of a plan (unet3d, 32 and 128 epochs),
        and a candidate predicted slower than the expected best confirmed nothing new."""
        times = [self._best_s, *(t[1] for t in self._decided_likely()),
                 *(t[1] for t in self._earlier_told)]
        times = [t for t in times if t is not None and math.isfinite(t)]
        return min(times) if times else None

    def best_per_chance(self) -> float | None:
        """The least expected time per chance of reaching the target of a decided contender
        likely to reach it: the one the measure stage would measure first (orchestrator/
        measure.py ranks them so). While the race hedges (`hedged`), a candidate of a model not
        yet decided is worth racing where it can beat this, not only the best expected time: if
        the decided ones all miss, it is the answer."""
        times = [t[1] / t[4] for t in self._decided_likely()] + \
            [mid / reach for _, mid, reach in self._earlier_told]
        times = [t for t in times if math.isfinite(t)]
        return min(times) if times else None

    def hedged(self) -> set[str]:
        """The models (trainables/identity.model_key) of every contender decided so far, while
        none of them is `SURE` to reach the target and nothing has reached it (else empty): the
        next confirmations go to models not yet decided first. Contenders of one model share its
        fate: four of them at four batches and precisions, each decided 0.59-0.78 likely, all
        missed (unet3d at 128 epochs, a baseline at 0.9723), where another model's would have
        answered."""
        if self.secured():
            return set()
        return {model_key(config) for config, _ in self._decided_chances()}

    def secured(self) -> bool:
        """An answer is in hand: a time to the target measured, or a decided contender `SURE` to
        reach it. Until then a candidate raced is also the fallback where the decided all miss
        (orchestrator/screen/bets.py weighs a bet only once an answer is secured)."""
        return self._best_s is not None or any(r >= SURE for _, r in self._decided_chances())

    def raced_reach(self) -> float:
        """The chance a contender raced reaches the target, as the race has told it so far (1
        before anything is told): the mean of each decided contender's chance, a time measured
        counting as 1 and a miss (ended or cut short of the target) as 0; earlier searches' on
        this data too. What a bet saves, it saves where it reaches the target (orchestrator/
        screen/bets.py; the search that showed it: orchestrator/screen/confirm.py
        `Confirmations._pays`)."""
        chances = [chance for _, chance in self._decided_chances()]
        chances += [1.0] * (len(self._reached) + self._earlier_hits)
        chances += [0.0] * (len(self._missed) + len(self._earlier_missed))
        return statistics.fmean(chances) if chances else 1.0

    def _decided_chances(self) -> list[tuple[dict, float]]:
        """(configuration, chance to reach the target) of every contender decided so far."""
        return self._earlier_decided + [(self._configs[trial], self._told[trial][4])
                                        for trial in self._decided() if trial in self._configs]

    def _decided_likely(self, besides: str | None = None) -> list[tuple]:
        """What the race told of each decided contender likely to reach the target."""
        return [self._told[trial] for trial in self._likely(besides)]

    def _decided(self, besides: str | None = None) -> list[str]:
        """The contenders the race decided (stopped with their expected time)."""
        return [trial for trial in self._told if trial != besides
                and self._stopped.get(trial, (None,))[0] == TrialStatus.DECIDED]

    def _likely(self, besides: str | None = None) -> list[str]:
        """The decided contenders likely to reach the target."""
        return [trial for trial in self._decided(besides) if self._told[trial][4] >= LIKELY]

    def twin_expected(self, config: dict, predicted_s: float) -> float | None:
        """The soonest `config` can be expected at the target where the race decided a twin
        of it (its run at another precision) as likely to reach it: the twin's expected time at
        this one's pace (`predicted_s` over the twin's predicted time, one screen's timings).
        Twins learn alike (above), so the race's reading of the twin's curve is this one's;
        only the pace differs. A finer precision may learn more (`PRECISION_COST`): from a
        coarser twin, `FINER_GAIN` of that. The soonest such; None where no twin tells it."""
        told = [(self._configs[trial], self._told[trial][1], self._expected.get(trial, 0.0))
                for trial in self._likely() if trial in self._configs]
        times = [mid * predicted_s / predicted * (FINER_GAIN if _bits(config) > _bits(twin)
                                                  else 1.0)
                 for twin, mid, predicted in told + self._earlier_twins
                 if predicted > 0 and math.isfinite(mid) and twin_key(twin) == twin_key(config)]
        return min(times) if times else None

    def expectation(self, trial_id: str) -> tuple[float, float, float, int, float, float] | None:
        """(low, mid, high seconds, expected epoch, chance to reach, paced seconds) the race
        last told of a trial."""
        return self._told.get(trial_id)

    def time_to_target(self, trial_id: str) -> float | None:
        found = self._reached.get(trial_id)
        return found[0] if found else None

    def shortfall(self, trial_id: str) -> float | None:
        found = self._missed.get(trial_id)
        return found[0] if found else None

    def decision(self, trial_id: str) -> tuple[TrialStatus, str] | None:
        return self._stopped.get(trial_id)

    def decisions(self) -> dict[str, tuple[TrialStatus, str]]:
        """Every decision so far (a copy): trial id -> (status, reason)."""
        return dict(self._stopped)

    def twin_epoch(self, config: dict) -> tuple[int, str] | None:
        """(epoch, why): the earliest epoch `config`'s run can reach the target at, as its
        decided twins say (the earliest of several: the benefit of the doubt goes to the
        trial); None when no twin of it is decided."""
        return self._twins.get(twin_key(config))

    def misses(self) -> list[tuple[dict, float]]:
        """(configuration, how far short) of every miss, earlier searches' first."""
        return self._earlier_missed + [(c, gap) for gap, c in self._missed.values()]

    def shortfalls(self) -> list[tuple[dict, float]]:
        """The misses, and each contender decided as unlikely to reach the target, by what it
        is expected to end short: what rules out the configurations that learn no more
        (`learns_no_more`). At the classifier's 60 epochs every contender of the baseline's
        model was decided unlikely, at batch 128, 256 and 64 in turn, and the budget never
        reached another precision or batch 32: 1 search of 3 answered; with this, 3 of 6
        (docs/benchmarks.md, 2026-11-29)."""
        return self.misses() + self._unlikely

    def reached_configs(self, baseline: bool = False) -> list[dict]:
        """Every configuration known to reach the target (and the baseline's, first, with
        `baseline`)."""
        return (self._baseline if baseline else []) + self._held + \
            [c for _, c in self._reached.values()]

    def doubts(self, knobs: set[str]) -> set[tuple[str, str]]:
        """(knob, value) pairs, of `knobs`, of the models that missed that no configuration
        which reached the target holds: the value that keeps missing is likely what learns
        too little (thinner models and smaller patches trade accuracy for speed)."""
        held = set().union(*(pairs(c, knobs) for c in self.reached_configs(baseline=True)))
        doubted = [c for c, _ in self.shortfalls()]
        return set().union(*(pairs(c, knobs) for c in doubted)) - held

    def calibration(self) -> float:
        """Measured over predicted time to the target (median; 1 before any measurement): of
        trials that reached it, their time; of those the race decided, their pace alone (a
        decided contender's expected time also holds how much worse it learns, which is its
        own, not the prediction's error for the rest)."""
        ratios = self._ratios + [self._reached[t][0] / p for t, p in self._expected.items()
                                 if t in self._reached and p > 0]
        ratios += [pace_ratio(self._told[t][5], p) for t, p in self._expected.items()
                   if t not in self._reached and t in self._told
                   and self._stopped.get(t, (None,))[0] == TrialStatus.DECIDED]
        ratios = [r for r in ratios if r is not None]
        return statistics.median(ratios) if ratios else 1.0


def pace_ratio(paced_s: float | None, predicted_s: float | None) -> float | None:
    """A decided contender's time to the target at the predicted epochs and its measured pace,
    over the predicted time (None where either is unknown)."""
    if paced_s is None or predicted_s is None or not predicted_s > 0:
        return None
    ratio = paced_s / predicted_s
    return ratio if math.isfinite(ratio) and ratio > 0 else None


def pairs(config: dict, knobs: set[str]) -> set[tuple[str, str]]:
    """(knob, value) of `config`'s model, for `knobs` only."""
    return {(k, repr(v)) for k, v in model_of(config).items() if k in knobs}


def learns_no_more(config: dict, missed: dict, short_by: float = 0.0) -> bool:
    """`config` learns no more than `missed`, a configuration that missed the target by
    `short_by`: the same model at as many samples per step or more, at as few mantissa bits or
    fewer, or at any precision when the miss was larger than a precision can make up."""
    return model_of(config) == model_of(missed) \
        and samples_per_step(config) >= samples_per_step(missed) \
        and (_bits(config) <= _bits(missed) or short_by > PRECISION_COST)


def _bits(config: dict) -> int:
    """The mantissa bits `config` trains at (0 where its precision is not known)."""
    return MANTISSA_BITS.get(config.get("precision"), 0)
