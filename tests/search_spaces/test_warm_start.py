from __future__ import annotations

import pytest
from ray import tune

from search_spaces.warm_start import warm_start_points

SPACE = {"precision": tune.choice(["fp32", "bf16-mixed"]), "batch_size": tune.choice([32, 64]),
         "width": tune.choice([0.5, 1.0])}


def test_seed_settings_are_reduced_to_the_space_and_completed():
    points = warm_start_points("seeds", SPACE, {"batch_size": 32})
    assert points[0] == {"precision": "bf16-mixed", "batch_size": 64, "width": 1.0}
    # batch 128 is not offered: the fixed setting (32) fills it in.
    assert points[1] == {"precision": "bf16-mixed", "batch_size": 32, "width": 0.5}


def test_explicit_points_are_checked_against_the_space():
    assert warm_start_points([{"width": 0.5}], SPACE, {}) == [
        {"precision": "fp32", "batch_size": 32, "width": 0.5}]
    with pytest.raises(ValueError, match="outside the space"):
        warm_start_points([{"width": 3.0}], SPACE, {})
    with pytest.raises(ValueError, match="not a searched knob"):
        warm_start_points([{"lr": 0.1}], SPACE, {})
