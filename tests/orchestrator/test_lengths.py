"""How long the answer is measured, and what a longer run goes on from (orchestrator/lengths.py):
the lengths a quarter at a time where each goes on from the last one's decay, the epoch a run
keeps its checkpoint at, and which checkpoint the next goes on from."""

from __future__ import annotations

from orchestrator.lengths import attempts


def test_where_each_goes_on_the_lengths_step_up_a_quarter_at_a_time():
    # Where each goes on from the last one's decay, a quarter longer each time: 47 -> 59 costs
    # 59 - 36 = 23 epochs where 68 from the contender's 17 cost 51.
    assert attempts(47, 68, branches=True) == [47, 59, 68]
    assert attempts(29, 63, branches=True) == [29, 37, 47, 59, 63]
    assert attempts(3, 5, branches=True) == [3, 4, 5] and attempts(9, 9, branches=True) == [9]


def test_a_measured_run_keeps_its_checkpoint_where_its_decay_begins_and_the_next_goes_on():
    from types import SimpleNamespace

    from orchestrator.lengths import decay_epoch, going_on_from

    wsd = {"schedule": "wsd", "warmup_epochs": 15.75}
    assert decay_epoch({**wsd, "epochs": 47}) == 36 and decay_epoch({**wsd, "epochs": 60}) == 47
    assert decay_epoch({**wsd, "epochs": 18}) == 0  # its warm-up ends after its decay began
    assert decay_epoch({"schedule": "onecycle", "warmup_epochs": None, "epochs": 47}) == 0
    assert decay_epoch({"schedule": "wsd", "warmup_epochs": 0.5, "epochs": 3}) == 0  # 2 x 1 < 3
    winner = SimpleNamespace(epochs=16, checkpoint="race/16", curve=[[16, 0.7, 30.0]],
                             trial_id="w")
    assert going_on_from(winner, []) == ("race/16", [[16, 0.7, 30.0]], "w", "its contender's")
    missed = {"decay_checkpoint": "m/37", "decay_epoch": 37, "curve": [[37, 0.77, 70.0]],
              "trial_id": "m", "epochs": 48}
    assert going_on_from(winner, [missed]) == ("m/37", [[37, 0.77, 70.0]], "m",
                                               "its 48-epoch run's")
    # A run that kept none (its decay began before the contender's epoch) leaves the winner's.
    assert going_on_from(winner, [{**missed, "decay_epoch": 13}])[0] == "race/16"
    assert going_on_from(winner, [{**missed, "decay_checkpoint": None}])[0] == "race/16"


def test_one_scores_noise_is_read_off_the_second_half_of_the_baselines_curve():
    """A saturating curve with scores scattered by 0.005 reads near 0.005 whatever its trend;
    the first half (where the lr is high and the trend turns) is not read; fewer than 5 points
    tell nothing, and then no margin is asked."""
    import math
    import random

    from orchestrator.lengths import hold_margin, score_noise

    rng = random.Random(0)
    for sigma in (0.002, 0.005, 0.01):
        curve = [[e, 0.9 - 0.5 * math.exp(-e / 30) + rng.gauss(0, sigma), float(e)]
                 for e in range(1, 401)]
        assert 0.8 * sigma < score_noise(curve) < 1.2 * sigma
    wild_start = [[e, 0.2 if e % 2 else 0.6, float(e)] for e in range(1, 10)]
    calm_end = [[e, 0.8, float(e)] for e in range(10, 21)]
    assert score_noise(wild_start + calm_end) == 0.0
    short = [[e, 0.8, float(e)] for e in range(1, 8)]  # epochs 4-7 in its second half
    assert score_noise(short) is None and hold_margin(short) == 0.0
    assert hold_margin([]) == 0.0


def test_a_stretch_at_a_high_lr_in_the_second_half_is_not_read_as_noise():
    """The 32-epoch unet3d baseline (docs/benchmarks.md, 2026-12-05 19:37): its second half
    starts where the lr is still high and Dice moves by 0.02 epoch to epoch, then settles. Its
    answers' scores spread by 0.0006 and 0.0014 over three seeds; read as a standard deviation,
    the curve told 0.0059, and both answers were lengthened for nothing. Read robustly, it tells
    the settled end's scatter."""
    from orchestrator.curves import scatter
    from orchestrator.lengths import NOISE_FROM, score_noise

    dice = [0.6418, 0.8306, 0.8818, 0.9132, 0.9175, 0.8853, 0.9137, 0.93, 0.9312, 0.9349,
            0.9102, 0.9371, 0.9436, 0.9462, 0.9366, 0.9585, 0.9359, 0.9517, 0.9422, 0.9591,
            0.9581, 0.9614, 0.9659, 0.9643, 0.9643, 0.9648, 0.9653, 0.9669, 0.9664, 0.966,
            0.967, 0.967]
    curve = [[e, s, 2.46 * e] for e, s in enumerate(dice, start=1)]
    assert scatter(curve, NOISE_FROM) > 0.005
    assert 0.0005 < score_noise(curve) < 0.0015
