"""The race on a long job (orchestrator/screen/race.py `horizon`): where the baseline reached the
target early in its schedule, a contender is decided halfway to the target, not most of the way
there; where it reached it halfway or later, the race is as it was. No Ray."""

from __future__ import annotations

import math

import pytest

from orchestrator.evidence import Evidence
from orchestrator.screen.confirm import judged_at
from orchestrator.screen.predict import Prediction
from orchestrator.screen.race import (DECIDE_AT, POINTS_PER_RUN, RUNG, RaceRule,
                                      contender_schedule, horizon, point_every, schedule_for)
from trainables.config import TrialConfig
from trainables.loop.lr import schedule_multiplier
from trainables.loop.schedules import shared_steps
from trainables.status import TrialStatus

TARGET = 0.79


def _score(epoch: int) -> float:
    """A long job's curve: the target 0.79 first at epoch 32 of 128 (a quarter in), S = 0.80
    at its end, as unet3d at 128 epochs reached it at 35 of 128."""
    if epoch <= 32:
        return 0.5 + 0.2925 * epoch / 32
    return 0.7925 + 0.0075 * (epoch - 32) / 96


LONG = {"epochs": 128, "curve": [[e, _score(e), 1.0 * e] for e in range(1, 129)]}
# The same job cut at 40 epochs: the target at 32 of 40, late in the schedule.
SHORT = {"epochs": 40, "curve": LONG["curve"][:40]}


def test_the_race_reads_the_share_of_a_schedule_halfway_to_the_target():
    assert horizon(LONG, TARGET) == pytest.approx((32 / 128) / 0.5)  # a quarter in: half
    assert horizon(SHORT, TARGET) == 1.0  # 80% in: the whole schedule, as before
    assert horizon(LONG, 0.99) == 1.0  # never reached: nothing to scale by
    # About POINTS_PER_RUN points over the share it reads: every 4th epoch, not every 8th.
    assert point_every(LONG, TARGET) == round(128 * 0.5 / POINTS_PER_RUN) == 4
    assert point_every(SHORT, TARGET) == round(40 / POINTS_PER_RUN)


def _race(baseline: dict, planned: int) -> tuple[int, tuple[TrialStatus, str], Evidence]:
    """A contender that learns as the baseline does (its score at each fraction of its plan is
    the baseline's there), 1 s an epoch, until the race decides it."""
    evidence = Evidence()
    rule = RaceRule(baseline, TARGET, evidence)
    n = baseline["epochs"]
    for epoch in range(1, planned + 1):
        score = _score(max(1, round(epoch / planned * n)))
        out = rule("c", {"epoch": epoch, "epochs_planned": planned, "train_time_s": 1.0 * epoch,
                         "val_score": score, "val_epoch": epoch})
        if out is not None:
            return epoch, out, evidence
    raise AssertionError("never decided")


def test_on_a_long_job_a_contender_is_decided_halfway_to_the_target():
    epoch, (status, reason), evidence = _race(LONG, planned=128)
    # Halfway to its epoch 32 at the target (a quarter of its plan): by epoch 16, not 32.
    share = horizon(LONG, TARGET)
    assert status == TrialStatus.DECIDED, reason
    assert RUNG * share * 128 <= epoch <= math.ceil(DECIDE_AT * share * 128) == 16
    low, mid, high, at, *_ = evidence.expectation("c")
    assert at == 32 and mid == pytest.approx(32.0)  # where the baseline got there, 1 s an epoch
    assert low <= 32.0 <= high
    # Cut at 40 epochs, the same job's target comes late: judged from a fifth of its plan on and
    # decided by a quarter (this smooth curve tells it as soon as it is judged).
    epoch, (status, _), _ = _race(SHORT, planned=40)
    assert status == TrialStatus.DECIDED and RUNG * 40 <= epoch <= math.ceil(DECIDE_AT * 40)


def test_the_bet_on_a_slower_prediction_is_judged_where_the_race_decides():
    pred = Prediction(config={"batch_size": 8}, samples_per_s=100.0, epochs_ratio=1.0,
                      planned_epochs=182, predicted_epochs=45, predicted_time_s=28.3,
                      predicted_speedup=10.0)
    assert judged_at(pred) == pytest.approx(DECIDE_AT * 182 * 28.3 / 45)
    assert judged_at(pred, horizon(LONG, TARGET)) == pytest.approx(judged_at(pred) / 2)


def test_a_point_holds_the_best_of_every_epoch_validated_since_as_the_baselines_envelope():
    """unet3d's Dice swings between neighbouring epochs early on. A contender that learns as
    the baseline does, but scores a trough at every `point_every`-th epoch and its real score
    between: validated at the points alone it read as far behind and was cut as short; every
    epoch validated, its points hold its best so far, as the baseline's envelope does, and it
    is not cut. The race reads as many points as before."""
    from orchestrator.screen.race import VALIDATION

    every = point_every(SHORT, TARGET)  # 40 epochs: every 2nd
    assert every == 2 and VALIDATION["val_every"] == 1
    rule = None

    def run(validate_every: int) -> tuple[TrialStatus, str]:
        nonlocal rule
        rule = RaceRule(SHORT, TARGET, Evidence())
        for epoch in range(1, 41):
            report = {"epoch": epoch, "epochs_planned": 40, "train_time_s": 1.0 * epoch}
            if epoch % validate_every == 0:
                trough = epoch % every == 0 and epoch < 30
                report |= {"val_epoch": epoch,
                           "val_score": _score(epoch) - (0.25 if trough else 0.0)}
            out = rule("c", report)
            if out is not None:
                return out
        raise AssertionError("never decided")

    status, reason = run(validate_every=every)  # the troughs alone
    assert status == TrialStatus.PRUNED and "short" in reason, reason
    status, reason = run(validate_every=1)
    assert status == TrialStatus.DECIDED, reason
    points = rule._points["c"]  # at every 2nd epoch, each the best of the epochs up to it
    assert [round(p * 40) for p, _ in points] == list(range(2, 2 * len(points) + 1, 2))
    assert all(best == pytest.approx(_score(round(p * 40) - 1)) for p, best in points)


def test_on_a_long_job_the_answer_goes_on_from_its_contender():
    """The contender's warm-up ends where the race decides it, so the answer, expected at
    epoch 32 of its 128-epoch plan, is the contender trained on: on a warm-up of the whole
    plan's quarter (32 epochs) it could only be handed over on onecycle, from scratch."""
    share, onecycle = horizon(LONG, TARGET), {"schedule": "onecycle"}
    contender = contender_schedule(onecycle, 128, None, share)
    assert contender == {"schedule": "wsd", "warmup_epochs": DECIDE_AT * share * 128}
    assert contender["warmup_epochs"] == math.ceil(DECIDE_AT * share * 128) == 16
    assert schedule_for({**contender, "epochs": 32}, {}) == {}  # kept: it goes on
    whole = contender_schedule(onecycle, 128, None)
    assert schedule_for({**whole, "epochs": 32}, {})["schedule"] == "onecycle"

    def lr(epochs: int):
        cfg = TrialConfig(epochs=epochs, lr_scaling="none", **contender)
        return schedule_multiplier(cfg, epochs * 10)  # 10 steps an epoch

    # Step for step the same learning rates through the 16 epochs the race trained, and on to
    # the answer's decay (the resume check, trainables/loop/resume.py, asks the same).
    assert shared_steps(lr(128), lr(32), 128 * 10) == int(0.8 * (32 * 10 - 1)) + 1 > 16 * 10
    # Where the race reads the whole schedule (the target late in it), nothing changes.
    assert contender_schedule(onecycle, 40, None, horizon(SHORT, TARGET)) == \
        contender_schedule(onecycle, 40, None) == {"schedule": "wsd", "warmup_epochs": 10.0}
