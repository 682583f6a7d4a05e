"""The confirm stage's searcher (orchestrator/screen/confirm.Confirmations), no Ray: the order
it proposes in, when it stops, its calibration, its restore, and what a miss teaches it. It reads
the search's evidence (orchestrator/evidence.py), which the stopper writes."""

from __future__ import annotations

import math

import pytest

from orchestrator.evidence import SURE, Evidence
from orchestrator.objective import MatchBaselineObjective
from orchestrator.screen.confirm import Confirmations
from orchestrator.stopper import TargetStopper
from tests.orchestrator.test_screen_strategy import BASELINE
from trainables.status import TrialStatus

OBJECTIVE = MatchBaselineObjective(baseline_score=0.8, baseline_s=100.0)


def _stopper(objective=OBJECTIVE, curve=None) -> TargetStopper:
    return TargetStopper(objective, Evidence(), curve=curve)


def test_confirmations_go_in_order_and_stop_once_the_rest_cannot_win():
    import pickle

    evidence = Evidence()
    searcher = Confirmations([{"b": 1}, {"b": 2}, {"b": 3}], [10.0, 12.0, 30.0], evidence,
                             slack=0.75)
    pickle.dumps(searcher)  # Tune saves its searcher with the tuner
    assert searcher.suggest("t1") == {"b": 1}
    evidence.reached("t1", 11.0, {"b": 1})  # the first reached the target in 11 s
    assert searcher.suggest("t2") == {"b": 2}  # 12 s predicted: within the slack, worth it
    assert searcher.next_index() is None and searcher.left == [2]  # asks, proposes nothing
    assert searcher.suggest("t3") == "FINISHED"  # 30 s x 0.75 > 11 s: cannot win


def test_predictions_are_calibrated_by_the_confirmations_measured():
    """A confirmation that took 1.5x its prediction scales the rest: 14 s predicted is 21 s
    expected, x 0.75 slack > 15 s measured, so it is not confirmed (uncalibrated, 10.5 s would
    have been)."""
    stopper = _stopper()
    searcher = Confirmations([{"b": 1}, {"b": 2}, {"b": 3}], [10.0, 12.0, 14.0],
                             stopper.evidence)
    assert searcher.suggest("t1") == {"b": 1} and stopper.evidence.calibration() == 1.0
    assert stopper("t1", {"time_to_target_s": 15.0, "train_time_s": 15.0, "epoch": 5,
                          "epochs_planned": 10, "val_score": 0.8, "status": "running"})
    assert stopper.evidence.calibration() == pytest.approx(1.5)
    assert searcher.suggest("t2") == {"b": 2}  # 12 x 1.5 x 0.75 = 13.5 <= 15
    assert searcher.suggest("t3") == "FINISHED"  # 14 x 1.5 x 0.75 = 15.75 > 15


def test_an_earlier_searchs_measurements_calibrate_from_the_start():
    evidence = Evidence()
    # An earlier search's confirmation reached the target in 20 s, twice its prediction.
    evidence.earlier_reached({"b": 0}, 20.0, ratio=2.0)
    searcher = Confirmations([{"b": 1}, {"b": 2}], [9.0, 14.0], evidence)
    assert searcher.suggest("t1") == {"b": 1}  # 9 x 2 x 0.75 = 13.5 <= 20
    assert searcher.suggest("t2") == "FINISHED"  # 14 x 2 x 0.75 = 21 > 20


def test_confirmations_restored_go_on_where_they_stood(tmp_path):
    evidence = Evidence()
    configs, predicted = [{"b": 1}, {"b": 2}, {"b": 3}], [10.0, 12.0, 13.0]
    searcher = Confirmations(configs, predicted, evidence)
    assert searcher.suggest("t1") == {"b": 1}
    searcher.save(str(tmp_path / "searcher.pkl"))
    again = Confirmations(configs, predicted, evidence)
    again.restore(str(tmp_path / "searcher.pkl"))
    assert again.suggest("t2") == {"b": 2} and again.proposed["t1"] == {"b": 1}
    evidence.reached("t1", 20.0, {"b": 1})  # what t1 was predicted at calibrates the rest
    assert evidence.calibration() == pytest.approx(2.0)


def test_a_speed_only_variant_of_a_proposed_configuration_is_not_confirmed_again():
    """Two trials at a time would otherwise confirm the same run twice, with and without a
    switch the screen already timed: the second slot goes to a different run."""
    fast = {"batch_size": 128, "width": 0.5, "channels_last": True, "precision": "fp32"}
    bf16 = {**fast, "precision": "bf16-mixed"}  # rounds differently: another run
    searcher = Confirmations([fast, {**fast, "channels_last": False}, {**fast, "workers": 2},
                              bf16, {**bf16, "channels_last": False}],
                             [5.0, 6.0, 6.2, 6.5, 7.0], Evidence())
    assert searcher.suggest("t1") == fast
    assert searcher.suggest("t2") == bf16
    assert searcher.suggest("t3") == "FINISHED"
    # Nor is a variant of one an earlier search confirmed: its trial's profile picked the switch
    # (its knobs name none), so the variant would train that run again.
    earlier = {k: v for k, v in bf16.items() if k != "channels_last"}
    evidence = Evidence()
    evidence.earlier_reached(earlier, 30.0)
    searcher = Confirmations([fast, bf16], [5.0, 6.5], evidence)
    assert searcher.suggest("t1") == fast
    assert searcher.suggest("t2") == "FINISHED"


def test_an_earlier_searchs_miss_rules_out_what_learns_no_more():
    """A later search starts from an earlier one's misses (orchestrator/screen/knowledge.py):
    what learns no more is not confirmed, the same model at a smaller batch comes after new
    models."""
    thin = {"width": 0.5, "batch_size": 64, "precision": "fp32"}
    evidence = Evidence()
    evidence.earlier_missed(thin, 0.1)
    searcher = Confirmations([{**thin, "batch_size": 128}, {**thin, "batch_size": 32},
                              {**thin, "width": 1.0}], [4.0, 5.0, 6.0], evidence)
    assert searcher.suggest("a") == {**thin, "width": 1.0}
    assert searcher.suggest("b") == {**thin, "batch_size": 32}
    assert searcher.suggest("c") == "FINISHED"


def test_a_miss_casts_doubt_on_its_models_values_until_one_holding_them_reaches_the_target():
    """unet3d's predictions put the thinnest model at the smallest patch first; when it misses,
    the next confirmation goes to the model that shares none of its values, not to the next
    fastest thin or small-patch model. A value that reaches the target is doubted no more."""
    objective = MatchBaselineObjective(tolerance=0.01, baseline_score=0.8, baseline_s=100.0)
    stopper = _stopper(objective, curve=BASELINE["curve"])

    def report(trial, score=0.5, reached=math.nan):
        return stopper(trial, {"status": "running", "epoch": 12, "epochs_planned": 20,
                               "val_score": score, "train_time_s": 12.0,
                               "time_to_target_s": reached, "config": searcher.proposed[trial]})

    def model(width, patch, batch=8):
        return {"width": width, "patch_size": patch, "batch_size": batch,
                "precision": "bf16-mixed"}

    thin_small, wide_small = model(0.5, 16), model(1.0, 16)
    thin_big, wide_big = model(0.5, 24), model(1.0, 24)
    searcher = Confirmations([thin_small, wide_small, thin_big, wide_big, model(0.5, 16, 4)],
                             [4.0, 4.5, 5.0, 6.0, 6.5], stopper.evidence)
    assert searcher.suggest("a") == thin_small
    assert report("a")  # behind the baseline's curve: width 0.5 and patch 16 are doubted
    assert searcher.suggest("b") == wide_big  # the model holding neither
    assert report("b", score=0.8, reached=6.0)  # reached: width 1.0 and patch 24 are fine
    # Each left holds one doubted value but the thin model at a smaller batch, which holds two.
    assert searcher.suggest("c") == wide_small
    assert searcher.suggest("d") == thin_big
    assert searcher.suggest("e") == model(0.5, 16, 4)
    assert searcher.suggest("f") == "FINISHED"


def test_a_miss_casts_no_doubt_on_the_values_it_shares_with_the_baseline():
    """The baseline reached the target (its score is the target), so a miss is blamed on where
    it differs from the baseline's model. Seen in the README's first command: an fp32 miss at
    the baseline's width (1.0) and patch 16, then a miss at width 0.5 and patch 24, left every
    value doubted, and the confirmations went to width 0.5 at patch 16; width 1.0 at patch 24
    (the baseline's model, which reaches the target) was never tried."""
    from trainables.config import TrialConfig

    objective = MatchBaselineObjective(tolerance=0.01, baseline_score=0.8, baseline_s=100.0)

    def model(width, patch, batch=4, precision="bf16-mixed"):
        return {"width": width, "patch_size": patch, "batch_size": batch,
                "precision": precision}

    wide_small = model(1.0, 16, batch=2, precision="fp32")
    configs = [wide_small, model(0.5, 24), model(0.5, 16), model(0.5, 16, batch=8),
               model(1.0, 24)]
    baseline = TrialConfig.from_dict({"workload": "unet3d", "loop": "legacy", "batch_size": 2,
                                      "width": 1.0}).to_dict()  # its patch: the default, 24
    assert baseline["patch_size"] == 24
    for held, last in ((None, model(0.5, 16)), (baseline, model(1.0, 24))):
        stopper = _stopper(objective, curve=BASELINE["curve"])
        if held is not None:
            stopper.evidence.baseline_reached(held)

        def miss(trial):
            return stopper(trial, {"status": "running", "epoch": 12, "epochs_planned": 20,
                                   "val_score": 0.5, "train_time_s": 12.0,
                                   "time_to_target_s": math.nan,
                                   "config": searcher.proposed[trial]})

        searcher = Confirmations(configs, [4.0, 4.5, 5.0, 5.5, 6.0], stopper.evidence)
        assert searcher.suggest("a") == wide_small and miss("a")
        assert searcher.suggest("b") == model(0.5, 24) and miss("b")
        assert searcher.suggest("c") == last


@pytest.mark.parametrize("short_by, fp32_tried", [(0.03, False), (0.008, True)])
def test_a_miss_larger_than_a_precision_costs_rules_out_the_finer_precision_too(short_by,
                                                                               fp32_tried):
    """bf16 cost the classifier about a point (`PRECISION_COST`): a bf16 miss by less may be
    fp32's to make up, so fp32 is still tried (last); a miss by three points is the model's."""
    bf16 = {"width": 1.0, "batch_size": 4, "patch_size": 16, "precision": "bf16-mixed"}
    fp32 = {**bf16, "precision": "fp32"}
    other = {**bf16, "patch_size": 24}
    evidence = Evidence()
    evidence.earlier_missed(bf16, short_by)
    searcher = Confirmations([fp32, other], [4.0, 6.0], evidence)
    assert searcher.suggest("a") == other
    assert searcher.suggest("b") == (fp32 if fp32_tried else "FINISHED")


def test_until_a_decided_contender_is_sure_the_next_goes_to_a_model_not_yet_decided():
    """unet3d at 128 epochs, a baseline at 0.9723 (2026-12-06): the race decided four
    contenders of one model (width 0.5, patch 16), 0.59-0.78 likely each, and all four missed;
    width 1.0 was predicted 12.4 s, patch 24 25-30 s. Until one is SURE, the next goes to a
    model not decided yet, and another model is worth racing where it beats the decided ones'
    time per chance of reaching; once one is sure, the order is the predictions' again."""
    thin = {"precision": "bf16-mixed", "width": 0.5, "patch_size": 16}
    a, b = {**thin, "batch_size": 4}, {**thin, "batch_size": 8}
    wide = {**thin, "width": 1.0, "batch_size": 4}
    patch = {**thin, "patch_size": 24, "batch_size": 2}
    configs, predicted = [a, b, wide, patch], [10.3, 11.3, 12.4, 24.7]
    evidence = Evidence()
    searcher = Confirmations(configs, predicted, evidence)
    assert searcher.suggest("c1") == a
    evidence.expected("c1", 6.3, 16.2, 42.0, 59, 0.63, 10.3)
    evidence.stopped("c1", TrialStatus.DECIDED, "decided")
    assert searcher.suggest("c2") == wide  # not batch 8 of the model just decided
    evidence.expected("c2", 7.0, 17.0, 45.0, 60, 0.7, 12.4)
    evidence.stopped("c2", TrialStatus.DECIDED, "decided")
    # 24.7 s x 0.75 is past the best expected (16.2 s), not its 24.3 s per chance (17 / 0.7).
    assert evidence.best_expected() == pytest.approx(16.2)
    assert evidence.best_per_chance() == pytest.approx(17.0 / 0.7)
    assert searcher.next_index() == 3
    # A resumed search knows them as earlier results, and goes on alike.
    earlier = Evidence()
    earlier.earlier_expected(a, 42.0, 0.63, 16.2)
    earlier.earlier_expected(wide, 45.0, 0.7, 17.0)
    assert Confirmations(configs[1:], predicted[1:], earlier).next_index() == 2
    assert searcher.suggest("c3") == patch
    evidence.expected("c3", 10.0, 20.0, 30.0, 40, 0.9, 24.7)
    evidence.stopped("c3", TrialStatus.DECIDED, "decided")
    assert evidence.hedged() == set() and searcher.suggest("c4") == b  # one is sure
    # Nothing hedges where a decided contender was sure from the start.
    sure = Evidence()
    sure.expected("s", 6.3, 16.2, 30.0, 59, SURE, 10.3)
    sure.expect("s", 10.3, a)
    sure.stopped("s", TrialStatus.DECIDED, "decided")
    assert Confirmations([b, wide], [11.3, 12.4], sure).next_index() == 0
