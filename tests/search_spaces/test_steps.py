"""Batch sizes that would train 0 optimizer steps never reach a trial: dropped from the space
with a note naming the knob, or refused with the largest batch size that works.
Run: python -m pytest -q tests/search_spaces/test_steps.py"""

from __future__ import annotations

import pytest
from ray import tune

from search_spaces.steps import fit_batch_to_shards, largest_batch, steps_per_epoch


def test_steps_per_epoch_per_worker():
    assert steps_per_epoch(160, 256, 1) == 0
    assert steps_per_epoch(160, 160, 1) == 1
    assert steps_per_epoch(320, 256, 2) == 1  # 160 per worker, 128 per worker's batch
    assert largest_batch(160, 1) == 160 and largest_batch(321, 2) == 320


def test_values_that_cannot_step_are_dropped_with_a_note():
    notes: list[str] = []
    space = {"batch_size": tune.choice([64, 128, 256]), "workers": tune.choice([1, 2])}
    out = fit_batch_to_shards(space, {}, n_train=320, note=notes.append)
    # 2 workers: 160 samples each; 256 gives each a batch of 128 (fits), so nothing is dropped.
    assert list(out["batch_size"].categories) == [64, 128, 256] and not notes
    out = fit_batch_to_shards(space, {}, n_train=200, note=notes.append)
    assert list(out["batch_size"].categories) == [64, 128]
    assert len(notes) == 1 and "'batch_size'" in notes[0] and "[256]" in notes[0]
    assert list(space["batch_size"].categories) == [64, 128, 256]  # the input is not changed


def test_a_pinned_batch_that_cannot_step_is_refused_naming_the_largest_that_works():
    with pytest.raises(ValueError, match="batch_size 256 makes 0 optimizer steps with 160 "
                                         "samples per worker.*the largest that works is 160"):
        fit_batch_to_shards({}, {"batch_size": 256}, n_train=160)


def test_a_space_where_no_batch_can_step_is_refused():
    with pytest.raises(ValueError, match="knob 'batch_size'.*largest that works is 100"):
        fit_batch_to_shards({"batch_size": tune.choice([128, 256])}, {}, n_train=100)
    with pytest.raises(ValueError, match="knob 'batch_size'"):
        fit_batch_to_shards({"batch_size": tune.randint(16, 512)}, {}, n_train=100)
