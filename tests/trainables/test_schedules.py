"""The learning-rate schedules as functions of the step (trainables/loop/schedules.py), and the
race's warmup-stable-decay: its warm-up in epochs, shared by runs of any length (no torch run)."""

from __future__ import annotations

import pytest

from orchestrator.screen.race import contender_schedule, schedule_for
from trainables.config import TrialConfig
from trainables.loop.lr import schedule_multiplier
from trainables.loop.schedules import FLOOR, lr_multiplier, shared_steps

STEPS = 10  # optimizer steps an epoch


def _wsd(epochs: int, warmup: float):
    cfg = TrialConfig(schedule="wsd", warmup_epochs=warmup, epochs=epochs, lr_scaling="none")
    return schedule_multiplier(cfg, epochs * STEPS)


def test_wsd_warms_up_as_onecycle_holds_the_peak_then_decays_over_its_last_fifth():
    total = 40 * STEPS
    onecycle = [lr_multiplier("onecycle", s, total) for s in range(total)]
    wsd = [lr_multiplier("wsd", s, total) for s in range(total)]
    ramp = int(0.25 * (total - 1))
    assert wsd[:ramp] == pytest.approx(onecycle[:ramp], rel=1e-12)  # onecycle's very ramp
    decay = int(0.8 * (total - 1)) + 1
    assert set(wsd[ramp + 1:decay]) == {1.0} and onecycle[decay - 1] < 0.5
    assert wsd[decay:] == sorted(wsd[decay:], reverse=True) and wsd[-1] == pytest.approx(FLOOR)


def test_runs_with_one_warm_up_share_every_step_until_the_shorter_decays():
    long, short = _wsd(40, 10.0), _wsd(26, 10.0)
    shared = shared_steps(long, short, 40 * STEPS)
    assert shared == int(0.8 * (26 * STEPS - 1)) + 1  # the 26-epoch run's decay
    # onecycle warms up over a quarter of its own length: two lengths share one step.
    one = lambda epochs: schedule_multiplier(  # noqa: E731
        TrialConfig(epochs=epochs, lr_scaling="none"), epochs * STEPS)
    assert shared_steps(one(40), one(26), 40 * STEPS) == 1


def test_a_run_shorter_than_its_warm_up_still_decays():
    f = _wsd(5, 10.0)
    values = [f(s) for s in range(5 * STEPS)]
    assert max(values) == pytest.approx(1.0, abs=0.01) and values[-1] == pytest.approx(FLOOR)


def test_race_contenders_train_wsd_where_the_built_in_schedule_would_be_onecycle():
    assert contender_schedule({"schedule": "onecycle"}, 39, None) == {
        "schedule": "wsd", "warmup_epochs": 9.75}
    assert contender_schedule({"schedule": "cosine"}, 39, None) == {}

    class Yours:  # a task with an optimizer of its own: its schedule is not ours to change
        def optimizer(self, params, cfg): ...

    assert contender_schedule({"schedule": "onecycle"}, 39, Yours()) == {}


def test_a_run_too_short_for_the_contenders_warm_up_is_handed_over_on_onecycle():
    race = {"schedule": "wsd", "warmup_epochs": 7.75}
    assert schedule_for({**race, "epochs": 20}, {}) == {}
    assert schedule_for({**race, "epochs": 8}, {}) == {"schedule": "onecycle",
                                                       "warmup_epochs": None}
