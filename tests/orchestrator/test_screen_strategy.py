"""The parts of strategy 'screen' that need no Ray: candidates, predictions, what earlier searches
left, the stopper's bound, the economics (the confirmations' order and stop:
test_confirmations.py)."""

from __future__ import annotations

import math

import pytest
from ray import tune

from orchestrator.screen.knowledge import CONFIRM, SCREEN, WHOLE_SCREEN, Knowledge
from orchestrator.objective import MatchBaselineObjective
from orchestrator.screen.predict import describe, predict
from orchestrator.evidence import Evidence
from orchestrator.report import projected_economics
from orchestrator.screen.screening import (candidates, contenders, retimed, rounds_of, switch_variants,
                                    to_refine)
from orchestrator.stopper import GATE_MARGIN, LAG_FROM, TargetStopper, validation_gate
from orchestrator.screen.confirm import Confirmations
from trainables.data.arrays import DataMeta
from trainables.loop.noise import ALL_NOISE

BASELINE = {"config": {"batch_size": 32}, "epochs": 10, "val_score": 0.80,
            "train_time_s": 100.0, "noise_scale": 96.0,
            # reaches the target (0.795) at epoch 9 of 10
            "curve": [[e, min(0.80, 0.53 + 0.03 * e), 10.0 * e] for e in range(1, 11)]}


def _screened(batch: int, step_s: float, width: float = 1.0) -> dict:
    steps = 960 // batch
    return {"config": {"batch_size": batch, "width": width, "epochs": 10}, "status": "completed",
            "step_s": step_s, "one_off_s": 0.5, "steps_per_epoch": steps,
            "samples_per_s": batch / step_s}


def test_candidates_are_every_combination_and_a_continuous_knob_is_refused():
    space = {"batch_size": tune.choice([32, 64]), "width": tune.choice([0.5, 1.0, 2.0])}
    found = candidates(space, {"lr": 0.01})
    assert len(found) == 6 and all(c["lr"] == 0.01 for c in found)
    assert {(c["batch_size"], c["width"]) for c in found} == {
        (b, w) for b in (32, 64) for w in (0.5, 1.0, 2.0)}
    with pytest.raises(ValueError, match="'lr' is continuous"):
        candidates({"lr": tune.loguniform(1e-3, 1e-1)}, {})


def test_switch_variants_flip_one_switch_where_it_can_matter():
    image, signal = DataMeta(1, 3, spatial_dims=2), DataMeta(1, 3, spatial_dims=1)
    cfg = {"batch_size": 64, "channels_last": False}
    assert switch_variants(cfg, image, False, set()) == [{**cfg, "channels_last": True}]
    # A config that leaves it unset runs with the default (False): only True is new.
    assert switch_variants({"batch_size": 64}, image, False, set()) == [
        {"batch_size": 64, "channels_last": True}]
    assert switch_variants(cfg, signal, False, set()) == []  # no channels-last layout
    assert switch_variants(cfg, image, False, {"channels_last"}) == []  # the user's value wins


def test_a_bigger_batch_is_planned_longer_by_the_noise_scale():
    preds = predict([_screened(32, 0.010), _screened(128, 0.020)], BASELINE, target=0.795)
    by_batch = {p.config["batch_size"]: p for p in preds}
    same, big = by_batch[32], by_batch[128]
    assert (same.epochs_ratio, same.planned_epochs, same.predicted_epochs) == (1.0, 10, 9)
    ratio = (1 + 128 / 96) / (1 + 32 / 96)  # McCandlish: E(b) / E(b0)
    assert big.epochs_ratio == pytest.approx(ratio)
    assert big.planned_epochs == math.ceil(10 * ratio)
    assert big.predicted_epochs == math.ceil(big.planned_epochs * 9 / 10)
    # time = epochs to target x steps per epoch x step time, plus the one-off warm-up
    assert big.predicted_time_s == pytest.approx(big.predicted_epochs * 7 * 0.020 + 0.5)
    assert preds[0] is big and big.trial_config["epochs"] == big.planned_epochs  # fastest first
    assert big.predicted_speedup == pytest.approx(100.0 / big.predicted_time_s)  # its whole run


def test_a_noise_scale_past_any_batch_reads_inf_not_its_stored_cap():
    # A trained model whose gradient is all noise stores the cap (tracking keeps finite numbers).
    baseline = {**BASELINE, "noise": [[1, 3.0], [5, 1234.4], [10, ALL_NOISE]]}
    preds = predict([_screened(32, 0.010)], baseline, target=0.795)
    head = describe(preds, baseline, ["batch_size"])[0]
    assert "gradient noise scale 3 -> 1,234 -> inf along the baseline" in head


def _precision(result: dict, precision: str, **switches) -> dict:
    cfg = {**result["config"], "precision": precision, **switches}
    return {**result, "config": cfg, "samples_per_s": cfg["batch_size"] / result["step_s"]}


def test_a_config_whose_switch_was_not_screened_is_predicted_at_the_profiles_pick():
    """The profile picks channels_last in each trial: a candidate the screen did not time it
    for runs at the gain the pick had on its model (another batch), else its precision's."""
    own = [_precision(_screened(64, 0.020), "fp32"), _precision(_screened(64, 0.030), "bf16"),
           _precision(_screened(64, 0.020), "fp32", width=0.5)]
    pairs = [  # fp32: the variant 1.5x and 1.3x faster; bf16: 0.8x (the pick keeps its own)
        _precision(_screened(32, 0.015), "fp32"),
        _precision(_screened(32, 0.010), "fp32", channels_last=True),
        _precision(_screened(32, 0.013), "fp32", width=2.0),
        _precision(_screened(32, 0.010), "fp32", width=2.0, channels_last=True),
        _precision(_screened(32, 0.008), "bf16"),
        _precision(_screened(32, 0.010), "bf16", channels_last=True)]
    plain = {tuple(sorted(p.config.items())): p for p in predict(own + pairs, BASELINE, 0.795)}
    picked = predict(own + pairs, BASELINE, 0.795, profiled=("channels_last", "compile"))
    expected = {(64, "fp32", 1.0): 1.5, (64, "bf16", 1.0): 1.0,  # their models' own pairs
                (64, "fp32", 0.5): 1.4}  # no pair of its model: its precision's median
    for p in picked:
        before = plain[tuple(sorted(p.config.items()))]
        c = p.config
        gain = expected.get((c["batch_size"], c["precision"], c["width"]), 1.0)
        assert p.switch_gain == pytest.approx(gain), c
        assert p.samples_per_s == pytest.approx(before.samples_per_s * gain)
        # the steps run `gain` times faster; the one-off cost (0.5 s) does not
        assert p.predicted_time_s - 0.5 == pytest.approx((before.predicted_time_s - 0.5) / gain)
    # No screened pair of its model or precision: the median over all pairs (1.5, 1.3, 1.0).
    found = predict([_precision(_screened(64, 0.02), "fp16")] + pairs, BASELINE, 0.795,
                    profiled=("channels_last",))
    (alone,) = [p for p in found if p.config["batch_size"] == 64]
    assert alone.switch_gain == pytest.approx(1.3)


def test_switches_are_timed_for_the_fastest_and_one_batch_of_each_model():
    ranked = [{"batch_size": b, "width": w} for b, w in
              [(64, 1.0), (32, 1.0), (64, 0.5), (32, 0.5), (64, 2.0), (32, 2.0), (64, 4.0)]]
    assert to_refine(ranked, 1, 3, {"channels_last"}) == [ranked[0], ranked[2], ranked[4]]
    assert to_refine(ranked, 2, 2, {"channels_last"}) == ranked[:3]  # the first, then width 0.5
    assert to_refine(ranked, 3, 1, set()) == ranked[:3]


def test_without_a_noise_scale_epochs_follow_the_square_root_of_the_batch():
    recorded = {**BASELINE, "noise_scale": math.nan}
    (pred,) = predict([_screened(128, 0.020)], recorded, target=0.795)
    assert pred.epochs_ratio == pytest.approx(2.0)


def test_the_stopper_cuts_a_trial_slower_than_one_that_reached_the_target():
    objective = MatchBaselineObjective(tolerance=0.01, baseline_score=0.8, baseline_s=100.0)
    stopper = TargetStopper(objective, Evidence())
    assert stopper("fast", {"status": "running", "train_time_s": 30.0,
                            "time_to_target_s": 30.0, "epoch": 3})
    assert not stopper("slow", {"status": "running", "train_time_s": 20.0,
                                "time_to_target_s": math.nan})
    assert stopper("slow", {"status": "running", "train_time_s": 31.0,
                            "time_to_target_s": math.nan})
    status, reason = stopper.evidence.decision("slow")
    assert status == "pruned" and reason.startswith("slower than the fastest trial")
    # One that reaches the target at its last epoch ends by itself (`completed`): its time
    # counts all the same, and it did not miss.
    assert not stopper("last", {"status": "completed", "done": True, "epoch": 5,
                                "epochs_planned": 5, "train_time_s": 25.0, "val_score": 0.8,
                                "time_to_target_s": 25.0})
    assert stopper.evidence.best_s == 25.0 and stopper.evidence.shortfall("last") is None


def test_knowledge_reuses_timings_and_misses_on_the_same_machine_and_target_only(tmp_path):
    cfg = {"batch_size": 64, "epochs": 12}
    here = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    here.add(SCREEN, result={"config": cfg, "status": "completed", "step_s": 0.01})
    here.add(CONFIRM, config=cfg, target=0.80, status="early_stopped", time_to_target_s=20.0)
    failed = {**cfg, "batch_size": 512}
    here.add(CONFIRM, config=failed, target=0.80, status="pruned", time_to_target_s=None)
    again = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    assert again.screened(cfg)["step_s"] == 0.01
    assert again.confirmed(cfg, 0.79)["time_to_target_s"] == 20.0  # reached 0.80 >= 0.79
    assert again.confirmed(cfg, 0.81) is None  # a higher target: not settled
    assert again.confirmed(failed, 0.80)["status"] == "pruned"  # the same target: settled
    assert again.confirmed(failed, 0.81) is None  # another target: tried again
    assert again.confirmed(failed, 0.79) is None
    # A miss on one machine kind is tried again on another (it may have been cut for speed);
    # so is everything else measured there.
    elsewhere = Knowledge.load(tmp_path, "classifier", "abc123", machine="gpu-b")
    assert elsewhere.confirmed(failed, 0.80) is None
    assert elsewhere.screened(cfg) is None and elsewhere.confirmed(cfg, 0.79) is None
    other_data = Knowledge.load(tmp_path, "classifier", "fff", machine="cpu-a")
    assert other_data.entries == []


def test_knowledge_reuses_only_what_was_measured_at_this_searchs_speed(tmp_path):
    """One machine kind is not one speed: an entry is stamped with the step of its search's
    baseline (its clock), and a search reuses only entries within DRIFT_NOISE of its own.
    Entries without a speed (older files), or timed against other baseline settings, go by the
    machine kind alone, as does a search whose clock is not known yet (it is looking up its
    baseline)."""
    from orchestrator.history_baseline import DRIFT_NOISE

    cfg, old = {"batch_size": 64, "epochs": 12}, {"batch_size": 32, "epochs": 12}
    here = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    here.add(SCREEN, result={"config": old, "step_s": 0.02})  # before speeds were kept
    here.clock = 0.040
    here.add(SCREEN, result={"config": cfg, "step_s": 0.01})
    here.add(CONFIRM, config=cfg, target=0.80, status="early_stopped", time_to_target_s=20.0)
    again = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    assert [e.get("clock_step_s") for e in again.entries] == [None, 0.040, 0.040]
    assert again.screened(cfg)["step_s"] == 0.01  # no clock yet: the machine kind decides
    again.clock = 0.040 * (1 + DRIFT_NOISE * 0.9)  # within the noise: the same speed
    assert again.screened(cfg) is not None and again.confirmed(cfg, 0.80) is not None
    assert again.elsewhen() == 0
    for clock in (0.040 * (1 + DRIFT_NOISE * 1.1), 0.040 / (1 + DRIFT_NOISE * 1.1)):
        again.clock = clock  # slower, or faster, today: measured again
        assert again.screened(cfg) is None and again.confirmed(cfg, 0.80) is None
        assert again.screened(old)["step_s"] == 0.02 and again.elsewhen() == 2
    again.clock_of = "other settings"  # a step of other baseline settings: no telling
    assert again.screened(cfg) is not None and again.elsewhen() == 0
    again.clock_of = None
    again.add(SCREEN, result={"config": cfg, "step_s": 0.02})  # today's, on today's clock
    assert again.screened(cfg)["step_s"] == 0.02


def test_a_whole_screen_is_replayed_for_the_same_plan_on_the_same_machine_kind(tmp_path):
    # A contender's own entry holds its re-timed rounds (a median); the whole screen keeps what
    # the first search ranked, so a repeat predicts and confirms what the first did.
    cfg = {"batch_size": 64, "epochs": 12}
    here = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    here.add(SCREEN, result={"config": cfg, "step_s": 0.03, "rounds": [0.01, 0.03, 0.05]})
    here.add(WHOLE_SCREEN, plan="plan-1", results=[{"config": cfg, "step_s": 0.01}],
             loop_alone={"step_s": 0.02})
    again = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    whole = again.whole_screen("plan-1")
    assert whole["results"] == [{"config": cfg, "step_s": 0.01}]
    assert whole["loop_alone"] == {"step_s": 0.02}
    assert again.whole_screen("plan-2") is None  # other candidates, budget or profile
    assert Knowledge.load(tmp_path, "classifier", "abc123", machine="gpu-b"
                          ).whole_screen("plan-1") is None


def test_projected_economics_say_cost_and_payback_of_a_search_without_a_target():
    record = {"val_score": 0.80, "train_time_s": 100.0}
    best = {"val_score": 0.797, "speedup_vs_baseline": 4.0}
    lines, metrics = projected_economics(best, record, 100.0, search_cost_s=150.0)
    assert metrics["search_cost_baseline_runs"] == pytest.approx(1.5)
    assert metrics["payback_runs"] == pytest.approx(150.0 / 75.0)
    assert lines[0] == "best: 4.00x faster than baseline (0.797 vs 0.800)"
    assert projected_economics(best, None, None, 150.0) == ([], {})


def test_a_trial_behind_the_baselines_learning_curve_is_cut_and_its_learning_group_skipped():
    objective = MatchBaselineObjective(tolerance=0.01, baseline_score=0.8, baseline_s=100.0)
    stopper = TargetStopper(objective, Evidence(), curve=BASELINE["curve"])  # 0.56 ... 0.80
    evidence, proposed = stopper.evidence, {}

    def report(trial, epoch, score, planned=20):
        return stopper(trial, {"status": "running", "epoch": epoch, "epochs_planned": planned,
                               "val_score": score, "train_time_s": float(epoch),
                               "time_to_target_s": math.nan, "config": proposed.get(trial)})

    thin = {"width": 0.5, "batch_size": 64, "precision": "fp32"}
    wide = {**thin, "width": 1.0}
    searcher = Confirmations([thin, {**thin, "batch_size": 128},
                              {**thin, "accum_steps": 2}, {**thin, "precision": "bf16-mixed"},
                              {**thin, "batch_size": 32}, wide, {**wide, "batch_size": 32}],
                             [5.0, 5.5, 5.6, 5.8, 6.0, 7.0, 8.0], evidence)
    assert searcher.suggest("thin") == thin
    proposed.update(thin=thin, short={**thin, "width": 0.75})
    assert not report("thin", 8, 0.40)  # 40% of its schedule: the lr is high, not judged yet
    assert not report("wide", 12, 0.71)  # 60%: the baseline had 0.71 there
    assert not report("close", 12, 0.67)  # 0.04 behind: within the lag
    assert report("thin", 12, 0.60)  # 60%: 0.11 behind the baseline
    assert evidence.decision("thin")[1].startswith("behind")
    assert evidence.shortfall("thin") == pytest.approx(0.11)  # how far short it fell
    # So is a trial that ran all its epochs and ended below the target.
    assert not stopper("short", {"status": "completed", "epoch": 20, "epochs_planned": 20,
                                 "val_score": 0.78, "train_time_s": 20.0,
                                 "time_to_target_s": math.nan, "config": proposed["short"]})
    assert evidence.shortfall("short") == pytest.approx(0.79 - 0.78)  # short of the target
    # What learns no more than the thin model did is not tried: as big a batch or bigger, as
    # few mantissa bits or fewer. The thin model at a smaller batch may still reach the target:
    # it is tried after the models not yet tried, the model that came closest first.
    assert searcher.suggest("wide2") == wide
    proposed["wide2"] = wide
    assert report("wide2", 12, 0.65)  # 0.06 behind: closer than the thin model's 0.11
    assert searcher.suggest("next") == {**wide, "batch_size": 32}
    assert searcher.suggest("last") == {**thin, "batch_size": 32}
    assert searcher.suggest("none") == "FINISHED"


def test_a_confirmation_skips_validating_until_its_loss_nears_the_baselines_at_the_target():
    losses = [[e, 1.0 / e] for e in range(1, 11)]
    gate = validation_gate({**BASELINE, "losses": losses}, target=0.795)  # reached at epoch 9
    assert gate == {"val_skip_above_loss": pytest.approx(GATE_MARGIN / 9),
                    "val_skip_until": LAG_FROM}
    assert validation_gate(BASELINE, 0.795) == {}  # its losses were not recorded
    assert validation_gate({**BASELINE, "losses": losses}, 0.9) == {}  # never reached it
    # An epoch that skipped validation repeats the last score: the behind rule ignores it.
    stopper = TargetStopper(MatchBaselineObjective(tolerance=0.01, baseline_score=0.8,
                                                   baseline_s=100.0), Evidence(),
                            curve=BASELINE["curve"])
    result = {"status": "running", "epoch": 12, "epochs_planned": 20, "val_score": 0.0,
              "val_epoch": 0, "train_time_s": 12.0, "time_to_target_s": math.nan}
    assert not stopper("gated", result)
    assert stopper("gated", {**result, "val_epoch": 12})  # its own score: 0.71 behind


def test_a_finished_confirmation_teaches_its_twins_the_epochs_they_need():
    """An earlier search's confirmation (or one this search ran before a stop) tells the
    evidence when its twins can reach the target at the earliest (orchestrator/screen/
    twins.py)."""
    from orchestrator.screen.twins import teach_twins

    evidence = Evidence()
    run = {"precision": "bf16-mixed", "batch_size": 4, "width": 1.0, "epochs": 21}
    teach_twins(evidence, run, [[1, 0.5, 1.0], [2, 0.8, 2.0], [3, 0.92, 3.0]], 0.9,
                "early_stopped")
    thin = {**run, "width": 0.5}
    teach_twins(evidence, thin, [[1, 0.5, 1.0], [2, 0.6, 2.0], [3, 0.7, 3.0]], 0.9, "pruned")
    teach_twins(evidence, {**run, "batch_size": 8}, [], 0.9, "pruned")  # no curve: nothing
    teach_twins(evidence, {**run, "batch_size": 2}, [[1, 0.5, 1.0]], 0.9, "failed")  # a crash
    assert evidence.twin_epoch({**run, "precision": "fp32"})[0] == 2  # reached at 3
    assert evidence.twin_epoch({**thin, "precision": "fp32", "channels_last": True})[0] == 3
    assert evidence.twin_epoch({**run, "batch_size": 8}) is None
    assert evidence.twin_epoch({**run, "batch_size": 2}) is None
    assert evidence.twin_epoch({**run, "epochs": 30}) is None  # another schedule


def test_a_contender_timed_in_rounds_keeps_the_median_step_and_the_highest_peak():
    first = {**_screened(32, 0.010), "peak_mb": 100.0}  # a window the machine ran fast
    again = [{**_screened(32, 0.020), "peak_mb": 120.0}, {**_screened(32, 0.018), "peak_mb": 90.0},
             {"config": first["config"], "status": "failed", "reason": "worker group lost"}]
    found = retimed(first, again)
    assert found["rounds"] == [0.010, 0.020, 0.018]  # the failed round adds nothing
    assert found["step_s"] == pytest.approx(0.018) and found["peak_mb"] == 120.0
    assert found["samples_per_s"] == pytest.approx(32 / 0.018)
    assert rounds_of(found) == found["rounds"] and rounds_of(first) == [0.010]
    # What the predictions read follows: the median's time, not the fast window's.
    fast, median = predict([first], BASELINE, 0.795)[0], predict([found], BASELINE, 0.795)[0]
    assert median.predicted_time_s > fast.predicted_time_s


def test_a_prediction_re_timed_at_its_trials_start_rescales_only_its_steps():
    pred = predict([_screened(32, 0.010)], BASELINE, target=0.795)[0]
    assert pred.steps_to_target == 9 * 30 and pred.step_s == pytest.approx(0.010)
    # 270 steps at 0.015 s instead of 0.010: 1.35 s more; warm-up and feed unchanged.
    assert pred.at_step(0.015) == pytest.approx(pred.predicted_time_s + 270 * 0.005)
    assert pred.at_step(pred.step_s) == pytest.approx(pred.predicted_time_s)


def test_an_earlier_confirmation_settles_the_same_run_at_other_switches_when_it_learned(tmp_path):
    """A screen variant (channels_last) trains the run an earlier confirmation trained: what that
    one reached, or learned too little to reach, is the variant's too. A failure or a cut for
    speed says something about its switches only: the variant is not settled by it."""
    here = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    run = {"batch_size": 64, "epochs": 12}
    here.add(CONFIRM, config={**run, "channels_last": True}, target=0.80,
             status="early_stopped", time_to_target_s=20.0)
    thin = {**run, "width": 0.5}
    here.add(CONFIRM, config=thin, target=0.80, status="pruned", time_to_target_s=None,
             short_by=0.04)
    oom = {**run, "batch_size": 512, "channels_last": True}
    here.add(CONFIRM, config=oom, target=0.80, status="infeasible", time_to_target_s=None)
    slow = {**run, "batch_size": 32}
    here.add(CONFIRM, config=slow, target=0.80, status="pruned", time_to_target_s=None)
    assert here.confirmed(run, 0.80)["time_to_target_s"] == 20.0
    assert here.confirmed({**thin, "channels_last": True}, 0.80)["short_by"] == 0.04
    assert here.confirmed({**oom, "channels_last": False}, 0.80) is None
    assert here.confirmed({**slow, "channels_last": True}, 0.80) is None
    assert here.confirmed(oom, 0.80)["status"] == "infeasible"  # its own config: settled


def test_an_earlier_contender_is_handed_over_with_the_switches_it_ran(tmp_path):
    """A prediction that leaves channels_last to the profile settles a contender an earlier
    race decided with channels_last on: its row keeps the switch as a pick, so the run handed
    over is the run measured before (measure.exported: base, knobs, picks), not another."""
    from orchestrator.screen.confirm import settle

    here = Knowledge.load(tmp_path, "classifier", "abc123", machine="cpu-a")
    (pred,) = predict([_screened(64, 0.010)], BASELINE, 0.795)
    knobs = {"batch_size": 64, "epochs": pred.trial_config["epochs"]}
    ran = {**knobs, "channels_last": True}
    here.add(CONFIRM, config={**pred.trial_config, **ran}, knobs=ran, picks={}, target=0.795,
             status="decided", trial_id="a3ed125d", expected_s=5.0, expected_high_s=9.0,
             expected_epoch=8, expected_reach=0.9, search="earlier", search_id="earlier")
    settled = settle([pred], here, Evidence(), 0.795, "now", lambda p: dict(knobs))
    (rec,) = settled.earlier
    assert rec.knobs == knobs and rec.picks == {"channels_last": True}
    # A switch this search names keeps the earlier trial's value as a knob, not a pick.
    named = settle([pred], here, Evidence(), 0.795, "now",
                   lambda p: {**knobs, "channels_last": False}).earlier[0]
    assert named.knobs == ran and named.picks == {}


def test_contenders_are_an_equal_share_of_each_models_fastest():
    """unet3d: the thin model and the small patch are predicted fastest, but it is the wide
    model at the big patch that reaches the target: each model gets its share of the rounds."""
    def cfg(width, patch, batch, precision="bf16-mixed"):
        return {"width": width, "patch_size": patch, "batch_size": batch, "precision": precision}

    ranked = [cfg(0.5, 16, b, p) for p in ("bf16-mixed", "fp32") for b in (8, 4, 2)] + \
             [cfg(1.0, 24, b, p) for p in ("bf16-mixed", "fp32") for b in (8, 4, 2)]
    chosen = contenders(ranked, 6)
    assert chosen == ranked[:3] + ranked[6:9]  # 3 of each model, fastest first
    assert contenders(ranked, 24) == ranked and contenders([], 6) == []
