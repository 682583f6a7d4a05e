"""The race (orchestrator/screen/race.py): each contender extrapolated from the start of its
run against the baseline's curve, decided, cut or taught to the evidence: no Ray."""

from __future__ import annotations

import math

import pytest
from ray.tune.search import Searcher

from orchestrator.evidence import FINER_GAIN, LIKELY, PRECISION_COST, Evidence
from orchestrator.screen.confirm import SLACK, Confirmations, judged_at
from orchestrator.screen.predict import Prediction
from orchestrator.screen.race import (DECIDE_AT, NOISE_FLOOR, SIGMA, BaselineCurve, RaceRule,
                                      expect, noise)
from tests.orchestrator.baselines import BASELINE, NOISY
from trainables.status import TrialStatus


def _decided(rule: RaceRule, evidence: Evidence, scores: list[float], config: dict
             ) -> tuple[TrialStatus, str, float]:
    """Contender "a" of `config` raced on `scores` (one a validated epoch, 2 s each, of a
    10-epoch plan) until the rule stops it: (status, reason, its chance to reach the target)."""
    for e, score in enumerate(scores, 1):
        out = rule("a", {"epoch": e, "epochs_planned": 10, "train_time_s": 2.0 * e,
                         "val_score": score, "val_epoch": e, "config": config})
        if out is not None:
            break
    evidence.stopped("a", *out)
    *_, reach, _ = evidence.expectation("a")
    return (*out, reach)


def _decide(evidence: Evidence, tid: str, predicted_s: float, told: tuple) -> None:
    """A contender proposed at `predicted_s` that the race decided as `told` (low, mid, high,
    epoch, reach, paced)."""
    evidence.expect(tid, predicted_s)
    evidence.expected(tid, *told)
    evidence.stopped(tid, TrialStatus.DECIDED, "decided")


def _prediction(config: dict, planned: int, predicted: int, seconds: float) -> Prediction:
    return Prediction(config=config, samples_per_s=100.0, epochs_ratio=1.0,
                      planned_epochs=planned, predicted_epochs=predicted,
                      predicted_time_s=seconds, predicted_speedup=10.0)


def test_the_race_expects_a_contender_that_learns_as_the_baseline_where_the_baseline_got_there():
    curve = BaselineCurve(BASELINE["curve"])
    like = [(e / 10, s) for e, s, _ in BASELINE["curve"][:4]]  # its first 40%, exactly
    found = expect(curve, like, 0.79, planned=10, pace=(4, 8.0, 2.0))
    # r = 0: it reaches the target at epoch 8, as the baseline did: 8 + (8 - 4) x 2 s = 16 s.
    assert found.ratio == pytest.approx(1.0)
    assert found.mid_s == pytest.approx(16.0)
    assert found.low_s <= found.mid_s <= found.high_s <= 8.0 + 6 * 2.0  # by its plan's end
    worse = [(p, 1 - (1 - s) * 3) for p, s in like]  # three times the error, all along
    short = expect(curve, worse, 0.79, planned=10, pace=(4, 8.0, 2.0))
    assert short.ratio > 1.5 and math.isinf(short.mid_s)


def test_the_race_decides_cuts_a_loser_and_teaches_the_evidence():
    evidence = Evidence()
    rule = RaceRule(BASELINE, 0.79, evidence)

    def run(tid, scores, pace=2.0):
        out = None
        for e, s in enumerate(scores, 1):
            out = rule(tid, {"epoch": e, "epochs_planned": 10, "train_time_s": pace * e,
                             "val_score": s, "val_epoch": e})
            if out is not None:
                evidence.stopped(tid, *out)
                return e, out
        return None, None

    epoch, (status, reason) = run("fast", [0.5, 0.6, 0.65, 0.7])
    # Decided at the first epoch past DECIDE_AT of its 10: its bounds never come within TOLD.
    assert status == TrialStatus.DECIDED and epoch == math.ceil(DECIDE_AT * 10)
    assert "expected at the target" in reason
    low, mid, high, at, reach, paced = evidence.expectation("fast")
    assert low <= mid <= high and at <= 10 and 0 < reach <= 1
    # Learning as the baseline does, it gets there at the baseline's epoch 8, at 2 s an epoch.
    assert paced == pytest.approx(16.0)
    assert evidence.best_bound() == pytest.approx(high)
    # Five times slower an epoch: its soonest is later than the first's latest: cut.
    epoch, (status, reason) = run("slow", [0.5, 0.6, 0.65], pace=10.0)
    assert status == TrialStatus.PRUNED and reason.startswith("extrapolated slower")
    # One that learns nothing is a miss, taught as one.
    epoch, (status, reason) = run("flat", [0.2, 0.2, 0.2, 0.2])
    assert status == TrialStatus.PRUNED and "short of the target" in reason
    assert evidence.shortfall("flat") > 0


def _first_of_three_behind(configs: list[dict]):
    """Three confirmations against the noisy baseline; the first suggested is raced and scores
    ~1.25x the baseline's error. (searcher, evidence, its status, its reach)."""
    evidence = Evidence()
    rule = RaceRule(NOISY, 0.79, evidence)
    searcher = Confirmations(configs, [4.0, 5.0, 6.0], evidence)
    assert searcher.suggest("a") == configs[0]
    status, _, reach = _decided(rule, evidence, [0.4, 0.5, 0.55], configs[0])
    return searcher, evidence, status, reach


def test_one_decided_as_unlikely_to_reach_sends_the_next_confirmation_to_another_model():
    """Deciding by a quarter of a schedule, against a baseline whose validations scatter, a
    contender behind it is rarely cut as short (its reach is 0.3-0.45, not below 0.2): it is
    decided. Its model is doubted, so the
    next confirmation goes to a model without its values, and its plan's end bounds no other's
    time. Otherwise all four of the classifier's confirmations went to width 0.5, and missed."""
    thin, thin_smaller, wide = ({"width": 0.5, "batch_size": 8}, {"width": 0.5, "batch_size": 4},
                                {"width": 1.0, "batch_size": 8})
    searcher, evidence, status, reach = _first_of_three_behind([thin, thin_smaller, wide])
    assert status == TrialStatus.DECIDED and 0.2 < reach < LIKELY
    assert evidence.best_bound() is None  # it may well not get there: it bounds nothing
    assert searcher.suggest("b") == wide  # not the same thin model at a smaller batch


def test_one_decided_as_unlikely_rules_out_its_model_at_a_larger_batch():
    """Of the baseline's own model (no value of it can be doubted), one decided as unlikely to
    reach the target rules out that model at as large a batch or larger, as a miss would: the
    next confirmation goes to the smaller batch, not to one that learns less still. At the
    classifier's 60 epochs the race otherwise spent its four confirmations on batch 64-256,
    each decided unlikely, where the answer was batch 32."""
    big, bigger, small = ({"width": 1.0, "batch_size": 16}, {"width": 1.0, "batch_size": 32},
                          {"width": 1.0, "batch_size": 8})
    searcher, _, status, reach = _first_of_three_behind([big, bigger, small])
    assert status == TrialStatus.DECIDED and reach < LIKELY
    assert searcher.suggest("b") == small
    assert searcher.suggest("c") is Searcher.FINISHED  # batch 32 learns no more than 16


@pytest.mark.parametrize("scores, finer_too", [([0.4, 0.5, 0.55], True),
                                               ([0.45, 0.55, 0.6], False)])
def test_one_decided_unlikely_far_short_rules_out_a_finer_precision_too(scores, finer_too):
    """Its expected shortfall is its miss: expected to end further below the target than a
    precision can make up, the same model at fp32 learns no more either; just short, fp32 is
    still confirmed (bf16's mantissa cost the classifier about a point)."""
    evidence = Evidence()
    rule = RaceRule(NOISY, 0.79, evidence)
    bf16, fp32, small = ({"width": 1.0, "batch_size": 16, "precision": "bf16-mixed"},
                         {"width": 1.0, "batch_size": 16, "precision": "fp32"},
                         {"width": 1.0, "batch_size": 8, "precision": "bf16-mixed"})
    searcher = Confirmations([bf16, fp32, small], [4.0, 5.0, 6.0], evidence)
    assert searcher.suggest("a") == bf16
    status, _, reach = _decided(rule, evidence, scores, bf16)
    assert status == TrialStatus.DECIDED and reach < LIKELY
    (_, gap), = evidence.shortfalls()
    assert (gap > PRECISION_COST) == finer_too
    assert searcher.suggest("b") == (small if finer_too else fp32)


def test_a_point_is_held_as_uncertain_as_the_baselines_own_curve_scatters():
    """The race's noise is read off the baseline's curve: its floor for one without scatter,
    more the more its validations scatter, at most SIGMA (set on unet3d), and SIGMA where too
    few points tell it."""
    def dipped(by: float) -> list:  # BASELINE's validations at epochs 5 and 7 `by` lower
        return [[e, s - by * (e in (5, 7)), t] for e, s, t in BASELINE["curve"]]

    geometric = [[e, 1.0 - 0.5 * 0.8 ** e, 10.0 * e] for e in range(1, 11)]  # no scatter
    assert noise(geometric) == NOISE_FLOOR
    readings = [noise(dipped(by)) for by in (0.0, 0.01, 0.02, 0.03)]
    assert NOISE_FLOOR < readings[0] and readings == sorted(set(readings))
    assert readings[-1] < SIGMA == noise(NOISY["curve"])
    assert noise(BASELINE["curve"][:4]) == SIGMA  # 4 points: too few to tell


def test_a_contender_behind_a_smooth_baseline_is_cut_as_short_and_taught_as_a_miss():
    """Against a baseline whose curve scatters little, a contender 1.2x its error at equal
    progress is surely short: cut at its first judgment and taught as a miss (the classifier's
    width-0.5 contenders, held no surer than unet3d's Dice, were decided at a 0.3 chance and
    measured, and each ended 2-5 points short). Against a noisy one it is only decided."""
    config = {"width": 0.5, "batch_size": 16}
    outcomes = {}
    for name, baseline in (("smooth", BASELINE), ("noisy", NOISY)):
        evidence = Evidence()
        status, reason, reach = _decided(RaceRule(baseline, 0.79, evidence), evidence,
                                         [0.4, 0.5, 0.55], config)
        outcomes[name] = (status, reach, evidence.misses())
    status, reach, misses = outcomes["smooth"]
    assert status == TrialStatus.PRUNED and reach < 0.05
    assert [c for c, _ in misses] == [config]
    status, reach, misses = outcomes["noisy"]
    assert status == TrialStatus.DECIDED and 0.2 < reach < LIKELY and misses == []


def test_the_race_hands_over_the_epoch_it_expects_not_its_pessimistic_one():
    curve = BaselineCurve(BASELINE["curve"])
    like = [(e / 20, s) for e, s in [(2, 0.5), (4, 0.6), (6, 0.65), (8, 0.7)]]
    # A 20-epoch plan learning as the baseline's 10 (at equal progress): it is expected at the
    # target where the baseline got there, 80% of its plan (epoch 16), though its pessimistic
    # bound needs the whole plan.
    found = expect(curve, like, 0.79, planned=20, pace=(8, 16.0, 2.0))
    assert found.epoch == 16 and found.mid_s == pytest.approx(16.0 + 8 * 2.0)
    assert found.high_s > found.mid_s
    assert 0.5 < found.reach <= 1.0  # as likely as the baseline to get there, or more
    worse = [(p, 1 - (1 - s) * 1.15) for p, s in like]  # 15% more error, all along
    assert expect(curve, worse, 0.79, planned=20, pace=(8, 16.0, 2.0)).reach < found.reach


def test_the_race_reads_a_contenders_best_so_far_as_it_reads_the_baselines():
    def told(scores):
        evidence = Evidence()
        rule = RaceRule(BASELINE, 0.79, evidence)
        for e, s in enumerate(scores, 1):
            if rule("c", {"epoch": e, "epochs_planned": 10, "train_time_s": 2.0 * e,
                          "val_score": s, "val_epoch": e}) is not None:
                break
        return evidence.expectation("c")

    # A dip at epoch 3 says no more than the best before it: both sides are envelopes.
    assert told([0.5, 0.6, 0.45, 0.7]) == told([0.5, 0.6, 0.6, 0.7])
    assert told([0.5, 0.6, 0.45, 0.7]) != told([0.5, 0.6, 0.65, 0.7])


def test_a_candidate_must_beat_the_best_expected_time_not_the_best_pessimistic_one():
    """At a quarter of a plan the race's pessimistic bound was 2-3.5x its expected time
    (unet3d, 32 epochs): against it, a candidate predicted 30% slower than the decided best
    was still confirmed, and could only lose. The bar is the best expected time; the
    prediction's own error is the slack's."""
    evidence = Evidence()
    fast, slow, thin = {"batch_size": 8}, {"batch_size": 2}, {"batch_size": 8, "width": 0.5}
    searcher = Confirmations([fast, slow], [16.0, 23.0], evidence)
    assert searcher.suggest("a") == fast
    # Expected at 17.6 s, 10-35 s; its pace 1.125x the predicted one (18 s for 16 s).
    _decide(evidence, "a", 16.0, (9.9, 17.6, 34.6, 25, 0.86, 18.0))
    assert evidence.best_bound() == pytest.approx(34.6)
    assert evidence.best_expected() == pytest.approx(17.6)
    # 23 s predicted, 25.9 s at the measured pace, 19.4 s with the slack: under the
    # pessimistic bound, over the expected time.
    assert searcher.next_index() is None and searcher.suggest("b") == "FINISHED"
    # A decided contender unlikely to reach the target is no bar either.
    other = Evidence()
    _decide(other, "t", 5.0, (5.0, 9.0, 30.0, 40, 0.3, 5.0))
    assert other.best_expected() is None
    assert Confirmations([thin], [12.0], other).next_index() == 0


def test_a_bet_on_a_slower_prediction_is_made_only_where_the_race_tells_it_cheaply():
    """unet3d at 128 epochs: the baseline reached the target a quarter into its schedule, so
    every contender is predicted there too, where the race decides it (DECIDE_AT of its
    plan). A candidate predicted 2% slower than the measured best was confirmed for the
    slack and cut by the stopper once it had trained as long as the best took: 55 s of a
    161-s search. Where the race judges at well under the bar (32 epochs: the baseline reached
    the target halfway), the same bet stands, and without a race (judged None) every bet
    stands as before; so does a bet against an expected time, not a measured one."""
    evidence = Evidence()
    best = {"batch_size": 4, "width": 1.0}
    evidence.expect("best", 28.1)
    evidence.reached("best", 27.8, best)
    near_tie = _prediction({"batch_size": 8, "width": 1.0}, 182, 45, 28.3)
    halfway = _prediction({"batch_size": 8, "width": 0.5}, 49, 25, 30.0)
    faster = _prediction({"batch_size": 2, "width": 0.5}, 182, 45, 26.0)
    # A quarter of 182 epochs at 28.3 s per 45: 28.6 s, past 0.75 x 27.8 s.
    assert judged_at(near_tie) == pytest.approx(DECIDE_AT * 182 * 28.3 / 45)
    todo = [near_tie, halfway]
    raced = Confirmations([p.config for p in todo], [p.predicted_time_s for p in todo],
                          evidence, judged=[judged_at(p) for p in todo])
    assert raced.suggest("h") == halfway.config  # decided by 14.7 s: the bet stands
    assert raced.next_index() is None  # the near tie costs the bar: not proposed
    # Without a race, or where the prediction itself beats the bar, it is proposed.
    assert Confirmations([near_tie.config], [28.3], evidence).next_index() == 0
    assert Confirmations([faster.config], [26.0], evidence,
                         judged=[judged_at(faster)]).next_index() == 0
    # Against a decided contender's expected time (11-44 s around 15 s: no stopper cuts there)
    # the bet stands: held to it, a 128-epoch search never confirmed a width-1.0 model.
    decided = Evidence()
    _decide(decided, "thin", 10.8, (11.4, 14.6, 44.2, 60, 0.63, 11.2))
    wide = _prediction({"batch_size": 8, "width": 1.0}, 182, 45, 14.2)
    assert decided.best_expected() == pytest.approx(14.6) and decided.best_s is None
    assert Confirmations([wide.config], [14.2], decided,
                         judged=[judged_at(wide)]).next_index() == 0


def test_decided_contenders_calibrate_the_predictions_by_their_pace_alone():
    """In the race nothing trains to the target, so what calibrates the predictions is each
    decided contender's pace: its time at the predicted epochs, over the prediction. Not its
    expected time, which also holds how much worse it learns (a width-0.5 model expected at
    epoch 152 of 182 where 45 were predicted): scaled by that, the next model's prediction
    would have looked 3.4x slower, and the answer (unet3d, 128 epochs) was never confirmed."""
    evidence = Evidence()
    _decide(evidence, "thin", 10.7, (11.2, 36.3, 43.5, 152, 0.53, 11.0))
    assert evidence.calibration() == pytest.approx(11.0 / 10.7)
    wide = {"batch_size": 8, "width": 1.0}
    # Predicted 28.4 s: 29.2 s calibrated, 21.9 s with the slack, under the thin one's 36.3 s.
    assert Confirmations([wide], [28.4], evidence).next_index() == 0
    # Where a run ended at the target, its measured time counts as before.
    evidence.expect("hit", 20.0)
    evidence.reached("hit", 30.0, wide)
    assert evidence.calibration() == pytest.approx((11.0 / 10.7 + 1.5) / 2)


def test_a_twin_of_a_decided_contender_is_expected_where_it_is_at_its_own_pace():
    """unet3d at 32 epochs (2026-12-06): fp32 batch 2 was decided at 22.4 s, its bf16 twin
    predicted at the same pace (14.47 s against 14.43 s) was raced 10.7 s to be decided at
    22.5 s: what it learns was known, its pace the screen had timed. It is expected where its
    twin is at its own pace, so it is not raced where that cannot beat the best; a twin the
    screen timed twice as fast is. A resumed search (or a later one) that knows the decided
    twin only as an earlier result says the same. A twin at a finer precision may learn
    more (bf16 cost the classifier about a point): it is expected FINER_GAIN as soon."""
    b4, fp32 = {"precision": "bf16-mixed", "batch_size": 4}, {"precision": "fp32", "batch_size": 2}
    bf16 = {"precision": "bf16-mixed", "batch_size": 2}
    evidence = Evidence()
    searcher = Confirmations([b4, fp32, bf16], [14.37, 14.43, 14.47], evidence)
    for tid, told in (("a", (8.9, 14.85, 29.0, 20, 0.6, 14.85)),
                      ("b", (10.2, 22.4, 32.6, 26, 0.6, 16.29))):
        searcher.suggest(tid)
        evidence.expected(tid, *told)
        evidence.stopped(tid, TrialStatus.DECIDED, "decided")
    assert evidence.twin_expected(bf16, 14.47) == pytest.approx(22.4 * 14.47 / 14.43)
    assert evidence.twin_expected({**bf16, "batch_size": 8}, 14.47) is None  # no twin decided
    # A finer precision may learn more than its twin did: expected as much sooner as one was.
    assert evidence.twin_expected({**b4, "precision": "fp32"}, 16.0) == \
        pytest.approx(14.85 * 16.0 / 14.37 * FINER_GAIN)
    # Without its twin it would be a bet: 14.47 s calibrated to 15.6 s, within the slack.
    assert 14.47 * evidence.calibration() * SLACK < evidence.best_expected()
    assert searcher.next_index() is None
    assert Confirmations([bf16], [7.2], evidence).next_index() == 0  # 11.2 s: it can win
    earlier = Evidence()
    earlier.earlier_expected(b4, 29.0, 0.6, 14.85, predicted_s=14.37)
    earlier.earlier_expected(fp32, 32.6, 0.6, 22.4, predicted_s=14.43)
    assert Confirmations([bf16], [14.47], earlier).next_index() is None
    assert Confirmations([bf16], [7.2], earlier).next_index() == 0
    # unet3d at 32 epochs (2026-12-06): bf16 batch 2 decided at 17.1 s, its fp32 twin timed
    # 1.22x slower a step was raced 11.4 s to be decided at 21.5 s: even FINER_GAIN sooner than
    # its twin at its pace (17.8 s) it cannot win. Another search's fp32 twin, 1.10x slower
    # (19.1 s against 20.5 s), can, and was the answer there (at 20.0 s): it is raced.
    for bf16_s, bf16_pred, fp32_pred, raced in ((17.1, 14.61, 17.89, False),
                                                (20.5, 16.7, 18.3, True)):
        finer = Evidence()
        finer.earlier_expected(bf16, 30.0, 0.7, bf16_s, predicted_s=bf16_pred)
        index = Confirmations([{**bf16, "precision": "fp32"}], [fp32_pred], finer).next_index()
        assert (index == 0) is raced
    # A twin decided as unlikely to reach the target tells no time.
    unlikely = Evidence()
    unlikely.earlier_expected(fp32, 32.6, 0.3, 22.4, predicted_s=14.43)
    assert unlikely.twin_expected(bf16, 14.47) is None


def test_the_seed_reads_benchmark_reads_as_the_race_does():
    """benchmarks/seed_reads.py sets a contender's running-best error and validation loss
    against the baseline's at equal progress: learning as the baseline does on a plan twice as
    long reads 1 on both; twice the error and loss all along reads 2 on both; a dip in one
    validation's score reads as the best before it, as in the race's envelope."""
    from benchmarks.seed_reads import ratios

    base = [(e, 10, 1 - 0.5 * 0.8 ** e, 0.4 * 0.8 ** e) for e in range(1, 11)]
    stretched = [(e, 20, 1 - 0.5 * 0.8 ** (e / 2), 0.4 * 0.8 ** (e / 2)) for e in range(2, 21, 2)]
    assert ratios(stretched, base) == pytest.approx((1.0, 1.0))
    worse = [(e, p, 1 - 2 * (1 - s), 2 * v) for e, p, s, v in base]
    assert ratios(worse, base) == pytest.approx((2.0, 2.0))
    dipped = [(e, p, s - 0.3 * (e == 6), v) for e, p, s, v in worse]
    held = [(e, p, worse[4][2] if e == 6 else s, v) for e, p, s, v in worse]
    assert ratios(dipped, base) == ratios(held, base) != ratios(worse, base)
