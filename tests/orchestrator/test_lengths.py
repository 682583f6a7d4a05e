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
