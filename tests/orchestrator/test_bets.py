"""A bet in the race (a candidate predicted slower than the best so far) is raced only where
what it may save over the runs it has to pay back in is at least what deciding it costs."""

from __future__ import annotations

import math
import random

import pytest

from orchestrator.evidence import Evidence
from orchestrator.screen import bets
from orchestrator.screen.confirm import Confirmations, judged_at
from orchestrator.screen.predict import Prediction
from trainables.status import TrialStatus


def test_a_bets_saving_is_what_it_saves_a_run_on_average_over_its_prediction_error():
    rng = random.Random(7)
    for best, predicted in [(15.5, 18.0), (15.5, 15.5), (10.0, 30.0), (20.0, 8.0)]:
        draws = [max(0.0, best - predicted * math.exp(bets.SPREAD * rng.gauss(0, 1)))
                 for _ in range(100_000)]
        assert bets.saving(best, predicted) == pytest.approx(sum(draws) / len(draws), rel=0.03,
                                                             abs=0.01)
    # Far slower than the best it saves next to nothing; far faster, the best less its mean.
    assert bets.saving(10.0, 100.0) < 1e-4
    assert bets.saving(20.0, 2.0) == pytest.approx(20.0 - 2.0 * math.exp(bets.SPREAD ** 2 / 2))
    assert bets.saving(0.0, 5.0) == bets.saving(5.0, 0.0) == 0.0


def test_a_saving_counts_over_the_users_runs_or_the_searchs_own_payback():
    spent = iter([43.0, 60.0])
    own = bets.runs_to_repay(None, lambda: next(spent), baseline_s=53.9)
    # 43 s spent and the best's 15.5-s run, over the 38.4 s it saves a baseline run.
    assert own(15.5) == pytest.approx((43.0 + 15.5) / (53.9 - 15.5))
    assert own(15.5) == pytest.approx((60.0 + 15.5) / (53.9 - 15.5))  # it grows as it spends
    assert bets.runs_to_repay(20, lambda: 43.0, 53.9)(15.5) == 20.0
    # Nothing saved yet to repay from (or no baseline's time): every bet stands.
    assert bets.runs_to_repay(None, lambda: 43.0, 53.9)(60.0) == math.inf
    assert bets.runs_to_repay(None, lambda: 43.0, None)(15.5) == math.inf


def test_a_bet_that_cannot_pay_back_within_the_searchs_own_payback_is_not_raced():
    """unet3d at 32 epochs (2026-12-06, seed 1): with batch 4 decided at 15.5 s, batch 8,
    predicted at 18.0 s, was raced as a bet: 12.2 s of a 70-s search (1.30 baseline runs), to
    be expected at 27.5 s. What it could save, 1.4 s a run per chance, over the 1.5 runs the
    search then paid back in, is a quarter of the 9 s deciding it costs. Told the answer will
    be trained 20 times, the same bet is raced; with no runs to weigh (the reference's full
    confirmation), as before."""
    evidence = Evidence()
    evidence.expect("b4", 16.4, {"batch_size": 4})
    # Its pace as predicted; sure to reach the target (an answer in hand: bets.py).
    evidence.expected("b4", 9.3, 15.5, 30.2, 20, 0.85, 16.4)
    evidence.stopped("b4", TrialStatus.DECIDED, "decided")
    b8 = Prediction(config={"batch_size": 8}, samples_per_s=100.0, epochs_ratio=1.0,
                    planned_epochs=52, predicted_epochs=26, predicted_time_s=18.0,
                    predicted_speedup=3.0)
    cost = judged_at(b8)
    assert cost == pytest.approx(9.0)

    def searcher(runs):
        return Confirmations([b8.config], [18.0], evidence, judged=[cost], runs=runs)

    own = searcher(bets.runs_to_repay(None, lambda: 43.0, 53.9))
    assert own.next_index() is None and own.suggest("x") == "FINISHED"
    assert own.declined[0] == ("predicted at 18.0 s against 15.5 s, it saves 1.41 s a run "
                               "where it reaches the target (0.85 likely), 1.5 runs to repay "
                               "9.0 s")
    many = searcher(bets.runs_to_repay(20, lambda: 43.0, 53.9))
    assert many.suggest("y") == b8.config and not many.declined
    assert searcher(None).suggest("z") == b8.config
    # Predicted sooner than the best, a candidate must pay as a bet does (each counted over
    # the 1.5 runs, 0.85 likely to reach): at 6 s it saves 8.9 s a run, at 14 s 2.5 s.
    faster = Confirmations([b8.config], [6.0], evidence, judged=[cost],
                           runs=bets.runs_to_repay(None, lambda: 43.0, 53.9))
    assert faster.next_index() == 0
    near = Confirmations([b8.config], [14.0], evidence, judged=[cost],
                         runs=bets.runs_to_repay(None, lambda: 43.0, 53.9))
    assert near.next_index() is None and "against 15.5 s" in near.declined[0]


def test_until_an_answer_is_secured_a_bet_is_also_the_fallback_and_stands():
    """Classifier at 60 epochs (2026-12-07, seed 2): the decided contenders were 0.33-0.63
    likely to reach the target, and weighed as a bet alone bf16 batch 64 at width 1 (another
    seed's answer) was not raced; the decided all missed, and the search had no answer. Until
    a time is measured or a decided contender is sure to reach the target, a bet stands."""
    evidence = Evidence()
    evidence.expect("b128", 40.0, {"batch_size": 128, "width": 1.0})
    evidence.expected("b128", 20.1, 44.1, 62.5, 48, 0.63, 40.0)
    evidence.stopped("b128", TrialStatus.DECIDED, "decided")
    b64 = {"batch_size": 64, "width": 1.0}
    runs = bets.runs_to_repay(None, lambda: 60.0, 137.1)
    assert not bets.pays(44.1, 47.2, 16.9, runs(44.1))
    unsure = Confirmations([b64], [47.2], evidence, judged=[16.9], runs=runs)
    assert not evidence.secured() and unsure.suggest("a") == b64 and not unsure.declined
    # Once a time is measured the answer is in hand: the same bet is weighed, and left.
    evidence.expect("hit", 40.0)
    evidence.reached("hit", 44.1, {"batch_size": 128, "width": 1.0})
    sure = Confirmations([b64], [47.2], evidence, judged=[16.9], runs=runs)
    assert evidence.secured() and sure.next_index() is None and 0 in sure.declined


def test_a_bet_saves_only_where_it_reaches_the_target_as_raced_contenders_have():
    """unet3d at 32 epochs (2026-12-07, seed 0, family-25 AMD EPYC): batch 4 at width 1 was
    decided 0.88 likely at 46.7 s, patch 16 at width 0.5 was cut as short of the target, patch
    16 at width 1 decided 0.42 likely. Width 0.5 at patch 24, predicted sooner than the best
    (31.1 s, calibrated; 13.8 s to decide; the search then paid back in 1.7 runs), was raced
    as a sure win, and was decided 0.55 likely at 56.7 s: 20.8 s of a 153-s search for nothing.
    Weighed, once an answer was in hand, by the 0.43 chance the race's contenders had had of
    reaching the target, it is not raced; the width-1 patch-16 one before it, predicted at
    19.6 s, 8.5 s to decide over 1.46 runs, still is."""
    evidence = Evidence()
    assert evidence.raced_reach() == 1.0  # nothing told: a bet is weighed as before
    evidence.expect("w05p16", 15.5, {"width": 0.5, "patch_size": 16})
    evidence.missed("w05p16", 0.02, {"width": 0.5, "patch_size": 16})
    evidence.stopped("w05p16", TrialStatus.PRUNED, "extrapolated short of the target")
    evidence.expect("w1p24", 49.1, {"width": 1.0, "patch_size": 24})
    evidence.expected("w1p24", 24.4, 46.65, 84.5, 21, 0.877, 48.9)
    evidence.stopped("w1p24", TrialStatus.DECIDED, "decided")
    assert evidence.secured() and evidence.raced_reach() == pytest.approx(0.877 / 2)
    runs = bets.runs_to_repay(None, lambda: 71.0, 127.3)  # 1.46 runs against 46.65 s
    w1p16 = Confirmations([{"width": 1.0, "patch_size": 16}], [19.7], evidence,
                          judged=[8.5], runs=runs)
    assert w1p16.next_index() == 0 and not w1p16.declined
    evidence.expect("w1p16", 19.7, {"width": 1.0, "patch_size": 16})
    evidence.expected("w1p16", 14.5, 32.6, 32.6, 38, 0.42, 18.8)
    evidence.stopped("w1p16", TrialStatus.DECIDED, "decided")
    reach = evidence.raced_reach()
    assert reach == pytest.approx((0.877 + 0.42 + 0.0) / 3)
    later = bets.runs_to_repay(None, lambda: 90.0, 127.3)  # 1.7 runs
    w05p24 = {"width": 0.5, "patch_size": 24}
    assert bets.pays(46.65, 31.1, 13.8, later(46.65))  # as if sure to reach: raced
    assert not bets.pays(46.65, 31.1, 13.8, later(46.65), reach)
    searcher = Confirmations([w05p24], [31.9], evidence, judged=[14.2], runs=later)
    assert searcher.next_index() is None
    assert "(0.43 likely), 1.7 runs to repay" in searcher.declined[0]
    # A time measured counts as a sure reach: the same bet, once batch 4's run is in, pays.
    evidence.expect("hit", 40.0)
    for n in range(4):
        evidence.reached(f"hit{n}", 46.65, {"width": 1.0, "patch_size": 24})
    assert evidence.raced_reach() > 0.7
    assert Confirmations([w05p24], [31.9], evidence, judged=[14.2],
                         runs=later).next_index() == 0


def test_a_searcher_that_weighs_bets_pickles_as_tune_saves_it():
    """Tune pickles its searcher with the run's state (tuner.pkl). The runs a bet must repay
    read the driver's clock, which holds the search's output stream: pickled with it, a search
    failed in its confirm stage ("cannot pickle 'EncodedFile' object")."""
    import io
    import pickle

    import ray.cloudpickle as cloudpickle

    stream = io.TextIOWrapper(io.BytesIO())  # like the search's output: not picklable

    class Driver:
        out = stream

        def cost_s(self) -> float:
            return 43.0

    evidence = Evidence()
    searcher = Confirmations([{"batch_size": 8}], [18.0], evidence, judged=[9.0],
                             runs=bets.runs_to_repay(None, Driver().cost_s, 53.9))
    with pytest.raises((TypeError, pickle.PicklingError)):
        cloudpickle.dumps(stream)
    copy = cloudpickle.loads(cloudpickle.dumps(searcher))
    assert copy.runs is None and copy.left == searcher.left
    assert searcher.runs is not None  # the live searcher still weighs its bets
