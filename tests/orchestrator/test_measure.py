"""The measure stage's choices after a miss (orchestrator/measure.py): a longer schedule only
while lengthening pays, and nothing that learns less than a configuration measured short.
Whether an answer holds: tests/orchestrator/test_measure_hold.py."""

from __future__ import annotations

from orchestrator.records import TrialRecord
from tests.orchestrator.measure_stage import decided as _decided
from tests.orchestrator.measure_stage import measure_stage as _measure_stage
from tests.orchestrator.measure_stage import model as _model
from tests.orchestrator.measure_stage import told as _told


def test_a_measured_miss_is_lengthened_only_while_it_pays_and_rules_out_what_learns_no_more(
        tmp_path):
    """The classifier at 60 epochs (docs/benchmarks.md): batch 128 measured at 68 epochs ended
    at 0.7615 and at 94 at 0.7600, then 120 epochs cost 204 s to end at 0.7585; batch 64 reached
    the target. Now the third length is not trained: the second made up nothing of the 0.0175
    still missing, well outside its own validation noise. Batch 256 of the same model, ranked
    between them, learns no more than batch 128 did (a larger batch, no finer precision), so it
    is not measured either; batch 64 is, and is the answer."""
    decided = [_told("a", 128, 120, 68, 80.0), _told("b", 256, 120, 70, 85.0),
               _told("c", 64, 85, 56, 90.0)]
    plateau = [0.70] * 20 + [0.7575, 0.759, 0.7575]
    runs = {(128, 68): [*plateau, 0.7615], (128, 94): [*plateau, 0.7600],
            (64, 56): [0.70] * 50 + [0.7785]}
    asked, answer, said = _measure_stage(tmp_path, decided, runs)
    assert asked == [(128, 68), (128, 94), (64, 56)]
    assert answer["reached"] and answer["config"]["batch_size"] == 64
    assert [a["epochs"] for a in answer["attempts"]] == [68, 94, 56]
    assert any("not 120 epochs" in line for line in said)
    assert any("not " in line and "batch_size=256" in line and "learns no more" in line
               for line in said)


def test_a_lengthening_that_pays_or_a_miss_within_the_noise_is_tried_again(tmp_path):
    """unet3d at 128 epochs: Dice 0.936 at 60 epochs, 0.948 at 121 (made up more than half of
    the 0.022 missing), and the target at 182: every length is trained. A miss within the
    run's own validation noise is tried again too, though the last lengthening lost: at 0.002
    short with its last scores 0.7745-0.7645, the next run lands above as often as not."""
    from orchestrator.lengths import why_not_longer

    def run(epochs: int, best: float, tail: list[float] = ()) -> dict:
        curve = [[i + 1, s, 0.0] for i, s in enumerate([*tail, best])]
        return {"epochs": epochs, "best_score": best, "curve": curve}

    def longer(runs: list[dict], target: float) -> bool:
        return why_not_longer(runs, target) is None

    assert longer([], 0.9578) and longer([run(60, 0.9361)], 0.9578)
    assert longer([run(60, 0.9361), run(121, 0.9482)], 0.9578)
    stops = why_not_longer([run(60, 0.9361), run(121, 0.9400, [0.94] * 4)], 0.9578)
    assert stops == ("60 -> 121 epochs moved its best score +0.0039 (60 -> 121: +0.0039), "
                     "0.0178 still missing, 1 lengths to its plan")
    noisy = [0.7745, 0.7695, 0.7645]
    assert longer([run(68, 0.777), run(94, 0.7755, noisy)], 0.7775)
    assert not longer([run(68, 0.777), run(94, 0.7755, [0.7755] * 3)], 0.7775)

    decided = [_told("a", 128, 120, 60, 80.0)]
    runs = {(128, 60): [0.80, 0.9361], (128, 90): [0.80, 0.9482], (128, 120): [0.80, 0.9606]}
    asked, answer, _ = _measure_stage(tmp_path, decided, runs, target=0.9578)
    assert asked == [(128, 60), (128, 90), (128, 120)] and answer["epochs"] == 120


def test_a_measured_run_that_validated_nothing_rules_nothing_out(tmp_path):
    """A run that failed before its first validation says nothing of what its configuration
    learns: its longer runs are tried as before, and a larger batch of its model is not passed
    over for it."""
    decided = [_told("a", 128, 120, 60, 80.0), _told("b", 256, 120, 60, 85.0)]
    runs = {(128, 60): [], (128, 90): [], (128, 120): [], (256, 60): [0.70] * 59 + [0.78]}
    asked, answer, said = _measure_stage(tmp_path, decided, runs)
    assert asked == [(128, 60), (128, 90), (128, 120), (256, 60)]
    assert answer["reached"] and answer["config"]["batch_size"] == 256
    assert any("nothing validated" in line for line in said)


def _contender(tid: str, batch: int, patch: int, planned: int, expected_epoch: int,
               seconds: float, reach: float) -> TrialRecord:
    """A contender the race decided, of its own patch (its own model), with its chance."""
    knobs = {"batch_size": batch, "patch_size": patch, "epochs": planned}
    return _decided(tid, knobs, seconds, reach, expected_epoch)


def test_a_sooner_candidate_is_measured_before_a_longer_run_of_one_that_missed(tmp_path):
    """unet3d at 128 epochs (docs/benchmarks.md, 2026-12-03): patch 16, ranked first (73.7 s
    expected at a 0.70 chance), ended 0.009 short at its 53 epochs, and was trained again at
    109 (138 s) where a patch-24 contender was expected at the target in 111 s per chance. Its
    longer run now comes after that contender, here at a second an epoch: patch 24 (96 s at
    0.9: 107 s, after patch 16's 105 s) goes before 109 epochs (109 s), and is the answer
    where it reaches; where it misses too (and its own longer run stops paying), the longer run
    passed over is measured after it."""
    decided = [_contender("p16", 4, 16, 164, 53, 73.7, 0.7),
               _contender("p24", 2, 24, 128, 27, 96.0, 0.9)]
    short = [0.90] * 52 + [0.9487]
    p24 = {True: [0.90] * 26 + [0.9600], False: [0.90] * 26 + [0.9500]}
    for reaches in (True, False):
        runs = {(4, 53): short, (2, 27): p24[reaches], (2, 78): [0.95] * 77 + [0.9505],
                (4, 109): [0.90] * 108 + [0.9590]}
        asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9575)
        assert asked == ([(4, 53), (2, 27)] if reaches else
                         [(4, 53), (2, 27), (2, 78), (4, 109)])
        assert answer["reached"] and answer["epochs"] == (27 if reaches else 109)
        assert any("109 epochs of it only after p24" in line for line in said)

    # Expected later than the longer run: it is lengthened first, as before.
    decided[1] = _contender("p24", 2, 24, 128, 27, 110.0, 0.9)
    runs = {(4, 53): short, (4, 109): [0.90] * 108 + [0.9590]}
    asked, answer, _ = _measure_stage(tmp_path, decided, runs, target=0.9575)
    assert asked == [(4, 53), (4, 109)] and answer["epochs"] == 109


def test_once_its_runs_took_longer_than_the_race_expected_the_others_are_expected_later(
        tmp_path):
    """unet3d at 128 epochs (docs/benchmarks.md, 2026-12-06, 20:27): width 1, expected at the
    target in 12.9 s, missed it at 34-85 epochs (27.9 s of training); its 107 epochs (35.1 s)
    waited for width-0.5 contenders expected in 30.4 s per chance, which missed at 68-107
    epochs, where the same seed's 107 epochs had reached it. Here at a second an epoch: the
    wide one, expected in 40 s, missed at 34 and 95 epochs (95 s: 2.4x the race's time); the
    thin one's 110 s per chance is taken 1.54x later (the square root), so the wide one's 155
    epochs (155 s) go first and reach. Before any run took longer than the race said (34 s
    against 40), the race's times stand; and a candidate still sooner when taken later (98 s per
    chance: 151 s) goes first, as the log says."""
    runs = {(4, 34): [0.94] * 34, (4, 95): [0.94] * 94 + [0.9557], (4, 155): [0.96] * 155,
            (8, 68): [0.95] * 67 + [0.96]}
    decided = [_contender("wide", 4, 16, 155, 34, 40.0, 0.8),
               _contender("thin", 8, 24, 207, 68, 66.0, 0.6)]
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9558)
    assert asked == [(4, 34), (4, 95), (4, 155)], said
    assert answer["reached"] and answer["epochs"] == 155

    decided[1] = _contender("thin", 8, 24, 207, 68, 58.8, 0.6)
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9558)
    assert asked == [(4, 34), (4, 95), (8, 68)] and answer["epochs"] == 68, said
    assert any("155 epochs of it only after thin: 155.0 s per chance at its pace, thin is "
               "expected at the target in 151.0 s per chance of reaching it (the race's 98.0 s, 1.54x"
               in line for line in said), said


def test_after_misses_the_next_is_measured_where_it_is_expected_before_the_baseline_ends(
        tmp_path):
    """The classifier at 15 epochs (docs/benchmarks.md, 2026-12-04): two cheap batch-256
    contenders (widths 0.5 and 1) missed at their whole plans, and the stage stopped at two
    configurations with no answer, where the third decided contender, fp32 batch 64, was the
    other searches' answer. Now it is measured: it is expected at the target before the
    baseline's run (101 s) ends, whatever the misses cost. Not where it is expected later:
    it would hand over no speedup."""
    decided = [_model("thin", 0.5, 256, "bf16-mixed", 21, 27.6),
               _model("wide", 1.0, 256, "bf16-mixed", 20, 46.1),
               _model("fp32", 1.0, 64, "fp32", 16, 67.1)]
    runs = {(256, 21): [0.60] * 20 + [0.713], (256, 20): [0.60] * 19 + [0.748],
            (64, 16): [0.60] * 15 + [0.760]}
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.755,
                                         baseline_s=101.2)
    assert asked == [(256, 21), (256, 20), (64, 16)]
    assert answer["reached"] and answer["config"]["batch_size"] == 64

    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.755, baseline_s=60)
    assert asked == [(256, 21), (256, 20)] and not answer["reached"]
    assert any("not measured: fp32 is expected at the target in 67.1 s, not before the "
               "baseline's run (60.0 s) ends" in line for line in said)
    # The first is measured whatever it is expected at: the race decided it.
    asked, _, _ = _measure_stage(tmp_path, decided, runs, target=0.755, baseline_s=20)
    assert asked == [(256, 21)]


def test_after_misses_an_unlikely_candidate_is_measured_where_reaching_would_pay(tmp_path):
    """The classifier at 60 epochs, seed 1 (docs/benchmarks.md, 2026-12-06): bf16 batch 32 and
    bf16 batch 64 at width 0.5 missed, and the stage stopped at bf16 batch 256, expected at the
    target in 70.3 s but 185 s per chance of reaching it, past the 168-s baseline: no answer,
    where fp32 batch 128, decided at 73.6 s, was the reference search's answer (2.17x). What a
    candidate hands over is its time, not its time per chance: batch 256 learns no more than
    batch 32 measured short (skipped), and fp32 batch 128 is measured and handed over."""
    decided = [_model("b32", 1.0, 32, "bf16-mixed", 60, 61.1, 0.95),
               _model("thin", 0.5, 64, "bf16-mixed", 63, 49.2, 0.6),
               _model("b256", 1.0, 256, "bf16-mixed", 78, 70.3, 0.379),
               _model("fp32", 1.0, 128, "fp32", 68, 73.6, 0.33)]
    assert [round(r.per_chance_s) for r in decided] == [64, 82, 185, 223]
    runs = {(32, 60): [0.70] * 59 + [0.7780], (64, 63): [0.70] * 62 + [0.7740],
            (128, 68): [0.70] * 60 + [0.7835] * 8}
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.783,
                                         baseline_s=167.7)
    assert asked == [(32, 60), (64, 63), (128, 68)]
    assert answer["reached"] and answer["config"]["batch_size"] == 128
    assert any("batch_size=256" in line and "learns no more" in line for line in said), said
    # Where reaching it would not pay either (a 70-s baseline), nothing more is measured.
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.783,
                                         baseline_s=70.0)
    assert asked == [(32, 60), (64, 63)] and not answer["reached"]
    assert any("not measured: fp32 is expected at the target in 73.6 s" in line
               for line in said)


def test_a_miss_on_the_races_schedule_is_lengthened_a_quarter_at_a_time(tmp_path):
    """At 60 classifier epochs fp32 batch 64 was measured at 29 epochs (0.7785 against 0.7830)
    and then at 46, from scratch past the race's 16 (docs/benchmarks.md). On the race's
    schedule each longer run goes on from the last one's decay (a quarter of the length more
    costs about 0.45 of it), so the lengths step by a quarter: 29, 37, 47, not halfway to the
    plan and then all of it."""
    knobs = {"schedule": "wsd", "warmup_epochs": 15.75}
    contender = _told("a", 64, 63, 29, 60.0)
    contender.knobs |= knobs
    runs = {(64, 29): [0.70] * 28 + [0.7785], (64, 37): [0.70] * 36 + [0.7805],
            (64, 47): [0.70] * 46 + [0.7840]}
    asked, answer, said = _measure_stage(tmp_path, [contender], runs, target=0.783)
    assert asked == [(64, 29), (64, 37), (64, 47)]
    assert answer["reached"] and answer["epochs"] == 47
    assert [a["epochs"] for a in answer["attempts"]] == [29, 37, 47]
    assert answer["config"]["schedule"] == "wsd"


def test_a_short_plan_is_lengthened_as_before_where_no_run_would_go_on_from_a_miss(tmp_path):
    """The README's 8-epoch unet3d search: the race stopped its winner at epoch 2 and expected
    it at 3. A 3-epoch run decays from its first epoch, before the race's, so no longer run can
    go on from it: a quarter at a time measured 3, 4, 5, 7 and 8 epochs, each from epoch 2 at
    a run's fixed cost. It is measured as before: 3, halfway (6), the plan (8)."""
    contender = _told("a", 2, 8, 3, 4.0)
    contender.knobs |= {"schedule": "wsd", "warmup_epochs": 2.0}
    contender.epochs = 2
    runs = {(2, 3): [0.90, 0.91, 0.916], (2, 6): [0.9] * 5 + [0.930],
            (2, 8): [0.9] * 7 + [0.940]}
    asked, answer, _ = _measure_stage(tmp_path, [contender], runs, target=0.9385)
    assert asked == [(2, 3), (2, 6), (2, 8)] and answer["reached"]


def test_a_larger_batch_further_along_its_plan_than_a_miss_is_still_measured(tmp_path):
    """unet3d at 128 epochs, seed 0 (docs/benchmarks.md, 2026-12-06): batch 4 at width 1 and
    patch 16 ended 0.0076 short at 48 epochs of its 155-epoch plan, and batch 8 of the same
    model, expected at the target at 82 of its 207, was passed over as learning no more; the
    search handed over a thin model at 155 epochs (4.81x) where the same batch 8 reached at 82
    epochs in the next search (9.76x). The race plans each batch for the samples it needs (a
    larger batch, more epochs): further along its plan than the miss, a larger batch may learn
    more, and is measured. At as large a share of its plan or less it is still passed over (a
    classifier search at 60 epochs measured batch 256 at its whole plan after batch 128 missed
    at its own, to end 0.0165 short)."""
    target = 0.9558
    for expected, ruled_out in ((82, False), (48, True)):
        decided = [_model("b4", 1.0, 4, "bf16-mixed", 155, 12.2, 0.9, expected_epoch=48),
                   _model("b8", 1.0, 8, "bf16-mixed", 207, 15.9, 0.9, expected_epoch=expected)]
        runs = {(4, 48): [0.90] * 47 + [0.9483], (8, 82): [0.90] * 81 + [0.9583],
                (4, 102): [0.90] * 101 + [0.9602]}
        asked, answer, said = _measure_stage(tmp_path, decided, runs, target=target)
        assert asked == ([(4, 48), (4, 102)] if ruled_out else [(4, 48), (8, 82)]), said
        assert answer["reached"] and answer["config"]["batch_size"] == (4 if ruled_out else 8)


def test_a_longer_run_passed_over_goes_before_a_later_candidate_it_would_end_before(tmp_path):
    """unet3d at 128 epochs, a baseline at 0.9723 (2026-12-06): width 1.0, measured first, ended
    0.0023 short at 73 epochs; its 92 epochs (21.1 s at its pace) waited for two width-0.5
    contenders expected sooner per chance (19.4 s, 19.6 s), which missed, and then for a third
    expected later (26.7 s), which missed too, before they reached the target. Here at a second
    an epoch: the wide one's 109 epochs (109 s) wait for batch 4 (76.9 s per chance, 1.08x
    later: the wide one's 58 epochs missed in 58 s, expected at the target in 50 s), but go
    before batch 4's own longer run (114 s) and before batch 2 (125 s per chance)."""
    decided = [_contender("wide", 8, 24, 160, 58, 50.0, 0.9),
               _contender("thin4", 4, 16, 153, 74, 60.0, 0.78),
               _contender("thin2", 2, 16, 128, 57, 57.0, 0.456)]
    runs = {(8, 58): [0.90] * 57 + [0.9550], (4, 74): [0.90] * 73 + [0.9433],
            (4, 114): [0.90] * 113 + [0.9443], (8, 109): [0.90] * 100 + [0.9600] * 9}
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9575)
    assert asked == [(8, 58), (4, 74), (8, 109)]
    assert answer["reached"] and answer["epochs"] == 109
    assert any("114 epochs of it only after 109 epochs of wide" in line for line in said)
    assert any("109 epochs of wide before thin2" in line for line in said)


def test_where_nothing_else_is_left_the_least_short_is_trained_once_at_its_plan(tmp_path):
    """unet3d at 128 epochs (2026-12-06, 12:00): width 1.0 batch 4 ended 0.9502 and 0.9506 at 54
    and 68 epochs of its 155 (the target 0.9558), lengthening gave up, the width-0.5 ones missed
    by more or were ruled out, and the search handed nothing over. With nothing else left, the
    one that missed least trains once at its plan, where that ends before the baseline's run.
    The wide one's longer run (95 s) goes before the thin one's (129 s)."""
    decided = [_contender("wide", 4, 24, 155, 34, 10.5, 0.87),
               _contender("thin", 8, 16, 207, 51, 12.2, 0.6)]
    runs = {(4, 34): [0.9400] * 34, (8, 51): [0.9200] * 51, (8, 129): [0.9210] * 129,
            (4, 95): [0.9405] * 95, (4, 155): [0.9600] * 155}
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9558)
    assert asked == [(4, 34), (8, 51), (4, 95), (8, 129), (4, 155)]
    assert answer["reached"] and answer["epochs"] == 155
    assert any("nothing else left: wide at its plan, 155 epochs" in line for line in said)
    # Where its plan would end after the baseline's run, it would hand over no speedup.
    asked, answer, _ = _measure_stage(tmp_path, decided, runs, target=0.9558, baseline_s=150.0)
    assert asked == [(4, 34), (8, 51), (4, 95), (8, 129)] and not answer["reached"]


def test_a_lengthening_whose_steps_so_far_make_up_the_miss_by_its_plan_goes_on(tmp_path):
    """unet3d at 128 epochs, baseline seed 3 (2026-12-06, 12:30): width 1, batch 4 ended 0.9454,
    0.9534 and 0.9543 at 44, 55 and 69 epochs of its 153 (the target 0.9623); the last quarter
    step moved it +0.0009, less than half of the 0.0080 missing, and it was given up (it reached
    at 105 and 153 epochs after two thinner configurations missed). Its two steps' mean gain
    over the four lengths left to its plan makes up the miss: it is measured on, and reaches."""
    knobs = {"batch_size": 4, "patch_size": 16, "epochs": 153, "schedule": "wsd",
             "warmup_epochs": 22.0}
    decided = [_decided("wide", knobs, 14.0, 0.87, 44)]
    scores = {44: 0.9454, 55: 0.9534, 69: 0.9543, 87: 0.9590, 109: 0.9629}
    # Each run's last scores within 0.001 of its best: no miss lies within its own noise.
    runs = {(4, epochs): [best - 0.001] * (epochs - 1) + [best]
            for epochs, best in scores.items()}
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9623)
    assert asked == [(4, 44), (4, 55), (4, 69), (4, 87), (4, 109)], said
    assert answer["reached"] and answer["epochs"] == 109
    assert not any("not " in line for line in said)




def test_a_lengthening_goes_before_a_candidate_only_per_its_chance_of_reaching(tmp_path):
    """unet3d at 32 epochs (docs/benchmarks.md, 2026-12-07): batch 8, patch 16, expected at the
    target first, missed it at 35 and 44 epochs of its 47 (0.9520, 0.9534 against 0.9556) and
    was trained a third time at 47 (0.9530), before patch 24, expected there in 50.3 s at a 0.9
    chance, reached it at once. Its 47 epochs add 3 to the 9 that moved it +0.0014, where 0.0022
    is missing: at their gain per epoch, with a retrain's noise (0.0009 on this baseline's
    curve), under a 0.2 chance. The candidate goes first, and is the answer; the first
    lengthening, whose gain nothing told yet, goes as before."""
    from orchestrator.lengths import lengthening_chance, retrain_noise

    rising = [0.62 + 0.02 * e for e in range(1, 17)]
    jitter = [4, -2, 5, -6, 1, 3, -4, 0, 6, -3, -1, 2, -5, 4, -2, 1]  # 1e-4s of Dice
    settled = [0.950 + 0.001 * e + 1e-4 * j for e, j in enumerate(jitter, start=1)]
    baseline = [[e, s, 3.6 * e] for e, s in enumerate(rising + settled, start=1)]
    noise = retrain_noise(baseline)
    assert 0.0005 < noise < 0.003
    misses = [{"epochs": 35, "best_score": 0.9520}, {"epochs": 44, "best_score": 0.9534}]
    assert lengthening_chance(misses[:1], 44, 0.9556, noise) == 1.0  # no gain told yet
    assert lengthening_chance(misses, 47, 0.9556, noise) < 0.2
    assert lengthening_chance(misses, 47, 0.9556, None) == 1.0
    # As many epochs again at that gain (+0.0024) would reach it as likely as not, or likelier.
    assert lengthening_chance(misses, 60, 0.9556, noise) > 0.5

    wsd = {"patch_size": 16, "schedule": "wsd", "warmup_epochs": 11.75}
    decided = [_decided("p16", {"batch_size": 8, "epochs": 47, **wsd}, 30.3, 0.65, 35),
               _decided("p24", {"batch_size": 2, "epochs": 32, **wsd, "patch_size": 24,
                                "warmup_epochs": 8.0}, 50.3, 0.9, 18)]
    runs = {(8, 35): [0.95] * 34 + [0.9520], (8, 44): [0.95] * 43 + [0.9534],
            (8, 47): [0.95] * 46 + [0.9530], (2, 18): [0.95] * 17 + [0.9587]}
    asked, answer, said = _measure_stage(tmp_path, decided, runs, target=0.9556,
                                         baseline_curve=baseline)
    assert asked == [(8, 35), (8, 44), (2, 18)], said
    assert answer["reached"] and answer["config"]["batch_size"] == 2
    assert any("47 epochs of it only after p24" in line for line in said)
    # Without the baseline's curve no noise tells its chance: lengthened first, as before.
    asked, _, _ = _measure_stage(tmp_path, decided, runs, target=0.9556)
    assert asked == [(8, 35), (8, 44), (8, 47), (2, 18)]
