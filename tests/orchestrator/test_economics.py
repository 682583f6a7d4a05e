"""The answer's economics by their one definition (orchestrator/economics.py) and the measure
stage's lengths: no Ray."""

from __future__ import annotations

import math

import pytest

from orchestrator.economics import compute, lines
from orchestrator.measure import attempts, validation_cadence
from orchestrator.records import TrialRecord
from tests.orchestrator.baselines import BASELINE
from trainables.config import TrialConfig
from trainables.loop.fit import validates
from trainables.status import TrialStatus


def _measured(train_s: float, at_s: float | None, epochs: int = 6, knobs=None) -> dict:
    config = TrialConfig.from_dict({"batch_size": 64, **(knobs or {}), "epochs": epochs})
    one = {"config": config.to_dict(), "epochs": epochs, "train_time_s": train_s,
           "time_to_target_s": at_s, "reached": at_s is not None, "best_score": 0.792,
           "first_use_s": 1.5}
    return {**one, "attempts": [one]}


def _trial(tid: str, status: str, reached: float | None = None, **knobs) -> TrialRecord:
    metrics = {"time_to_target_s": reached if reached is not None else math.nan}
    return TrialRecord(tid, 1, {"batch_size": 64, **knobs}, 0.0, 1.0, TrialStatus(status),
                       metrics=metrics)


def test_speedup_same_target_and_payback_by_their_definitions():
    e = compute(baseline=BASELINE, target=0.79, measured=_measured(40.0, 30.0), cost_s=90.0,
                confirmations=[_trial("a", "early_stopped", 30.0), _trial("b", "pruned")],
                loop_alone_s=80.0)
    assert e.speedup == pytest.approx(100.0 / 40.0)  # the whole runs: baseline's, as exported
    assert e.speedup_same_target == pytest.approx(80.0 / 30.0)  # first epochs at the target
    assert e.payback_runs == pytest.approx(90.0 / (100.0 - 40.0))
    assert e.search_cost_baseline_runs == pytest.approx(0.9)
    assert e.loop_alone_speedup == pytest.approx(1.25)
    assert e.search_adds == pytest.approx(2.5 / 1.25)  # the split multiplies back
    assert (e.hits, e.confirmations, e.hit_rate) == (1, 2, 0.5)
    assert [m["trial_id"] for m in e.misses] == ["b"]
    assert e.first_use_s == {"baseline": None, "found": 1.5}
    text = "\n".join(lines(e, BASELINE, []))
    assert "2.50x" in text and "2.67x" in text and "after 1.5 runs" in text


def test_a_measured_run_whose_pace_moved_from_its_confirmations_is_said_not_corrected():
    """Its speedup's numerator is one run on a machine whose speed moves: where the measured
    run's samples/s lies beyond PACE_NOISE of its confirmation's (the same settings), the
    summary says so and how to time it again; the speedup stands as measured."""
    from orchestrator.economics import PACE_NOISE, pace_held

    def paced(pace, confirmed):
        measured = _measured(40.0, 30.0)
        for run in (measured, *measured["attempts"]):
            run |= {"samples_per_s": pace, "confirmed_samples_per_s": confirmed}
        return compute(baseline=BASELINE, target=0.79, measured=measured, cost_s=90.0,
                       confirmations=[])

    disturbed = paced(42.5, 55.3)  # unet3d's answer on the AMD VM (docs/benchmarks.md)
    assert disturbed.pace_vs_confirmation == pytest.approx(42.5 / 55.3)
    assert disturbed.speedup == pytest.approx(100.0 / 40.0)  # said, not corrected
    (said,) = [t for t in lines(disturbed, BASELINE, []) if "pace check" in t]
    assert "0.77x its confirmation's samples/s" in said and "best_config.json" in said
    assert disturbed.metrics()["pace_vs_confirmation"] == pytest.approx(0.7685, abs=1e-4)
    held = paced(51.6, 55.3)  # the same run alone, against its race
    assert not any("pace check" in t for t in lines(held, BASELINE, []))
    assert any("pace check" in t for t in lines(paced(70.0, 55.3), BASELINE, []))  # faster too
    assert paced(None, 55.3).pace_vs_confirmation is None  # an earlier search's measurement
    assert pace_held(None) and pace_held(1 + PACE_NOISE - 1e-9)
    assert not pace_held(1 + PACE_NOISE + 1e-9) and not pace_held(1 / (1 + PACE_NOISE) - 1e-9)
    nothing = compute(baseline=BASELINE, target=0.79, measured=_measured(40.0, None),
                      cost_s=90.0, confirmations=[])
    assert nothing.pace_vs_confirmation is None


def test_an_answer_on_the_line_is_said_to_be_one_another_seed_may_miss():
    """measured.json says whether the answer's run ended beyond a retrain's noise (orchestrator/
    lengths.py `hold_margin`); one that did not is said so beside its speedup, which stands."""
    def held(holds):
        measured = _measured(40.0, 30.0) | {"hold_margin": 0.0078, "holds": holds}
        return compute(baseline=BASELINE, target=0.79, measured=measured, cost_s=90.0,
                       confirmations=[])

    line = [t for t in lines(held(False), BASELINE, []) if "on the line" in t]
    assert line == ["  on the line: its run ended 0.0020 above the target, within a retrain's "
                    "noise (0.0078): trained with another seed, it may end below it"]
    assert held(False).speedup == pytest.approx(2.5)
    assert not any("on the line" in t for t in lines(held(True), BASELINE, []))
    assert held(True).to_dict()["holds"] and held(True).metrics()["hold_margin"] == 0.0078


def test_no_answer_claims_no_speedup_and_a_slower_one_never_pays_back():
    none = compute(baseline=BASELINE, target=0.79, measured=_measured(40.0, None),
                   cost_s=50.0, confirmations=[])
    assert none.speedup is None and none.payback_runs is None and none.hit_rate is None
    assert "no speedup to claim" in "\n".join(lines(none, BASELINE, []))
    slower = compute(baseline=BASELINE, target=0.79, measured=_measured(120.0, 90.0),
                     cost_s=50.0, confirmations=[])
    assert slower.speedup < 1 and slower.payback_runs is None
    assert "never" in "\n".join(lines(slower, BASELINE, []))


def test_a_decided_contender_is_a_hit_where_its_measured_run_reached_the_target():
    decided = _trial("d", "decided")
    unmeasured = _trial("u", "decided", width=0.5)
    e = compute(baseline=BASELINE, target=0.79, measured=_measured(40.0, 30.0, epochs=9),
                cost_s=90.0, confirmations=[decided, unmeasured], base={})
    assert (e.hits, e.confirmations) == (1, 1)  # the unmeasured one counts neither way


def test_the_answer_is_measured_where_it_first_reached_then_halfway_then_whole():
    assert attempts(6, 12) == [6, 9, 12]
    assert attempts(12, 12) == [12] and attempts(11, 12) == [11, 12]
    # A middle barely shorter than the plan is not worth a run of its own: 14 of 15 saves 7%.
    assert attempts(13, 15) == [13, 15] and attempts(68, 120) == [68, 94, 120]


def test_a_long_measured_run_validates_about_32_times_and_at_its_end():
    assert validation_cadence({"epochs": 26}) == {"val_every": 1}  # every epoch, as before
    assert validation_cadence({"epochs": 214})["val_every"] == 7
    assert validation_cadence({"epochs": 214, "val_every": 10}) == {"val_every": 10}
    assert validation_cadence({"epochs": 22}, points=4) == {"val_every": 6}  # a shorter run
    cfg = TrialConfig.from_dict({"epochs": 214, **validation_cadence({"epochs": 214})})
    checked = [e for e in range(1, 215) if validates(cfg, e, 0.0)]
    assert len(checked) == 31 and checked[-1] == 214  # 7, 14, ..., 210 and the last


def test_a_decided_hit_has_a_prediction_error_against_its_measured_run():
    decided = _trial("d", "decided")
    decided.metrics["predicted_time_to_target_s"] = 36.0
    e = compute(baseline=BASELINE, target=0.79, measured=_measured(40.0, 30.0, epochs=9),
                cost_s=90.0, confirmations=[decided], base={})
    assert e.prediction_error == pytest.approx(0.2)  # (36 - 30) / 30, its run as handed over


def _told(tid: str, seconds: float, reach: float) -> TrialRecord:
    """A contender the race decided: expected at the target in `seconds`, with chance `reach`."""
    rec = _trial(tid, "decided")
    rec.metrics |= {"expected_time_to_target_s": seconds, "expected_reach": reach,
                    "objective": -1e6 + 1000 * 0.5}
    return rec


def test_the_measure_stage_tries_first_the_fastest_per_chance_of_reaching():
    hopeful, likely = _told("h", 20.0, 0.2), _told("l", 30.0, 0.9)
    sure = _trial("s", "early_stopped", 35.0)
    assert sorted([hopeful, likely, sure], key=lambda r: r.per_chance_s) == \
        [likely, sure, hopeful]
    assert _told("n", 30.0, float("nan")).per_chance_s == 30.0  # no chance told: at its word
    assert _trial("p", "pruned").per_chance_s is None  # neither measured nor told


def test_the_cost_is_shown_stage_by_stage_with_what_went_to_configurations_not_handed_over():
    answer = _trial("a", "decided")  # batch 64: the measured configuration's run
    answer.metrics["train_time_s"] = 12.0
    loser = _trial("l", "pruned", width=0.5)
    loser.metrics["train_time_s"] = 7.0
    e = compute(baseline=BASELINE, target=0.79, measured=_measured(40.0, 30.0, epochs=9),
                cost_s=90.0, confirmations=[answer, loser], base={},
                stage_s={"screen": 20.0, "predict": 0.01, "confirm": 30.0, "measure": 40.0})
    assert e.losers_s == pytest.approx(7.0)
    (line,) = [t for t in lines(e, BASELINE, []) if "by stage" in t]
    assert "screen 20 s, confirm 30 s, measure 40 s" in line and "predict" not in line
    assert "7 s of it trained configurations not handed over" in line
