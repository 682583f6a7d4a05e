"""How a trial is set up from its context and sampled settings (trainables/trial/trainable.py),
without Ray."""

from __future__ import annotations

from types import SimpleNamespace

from trainables.trial.trainable import reuse_actors, trial_profile


def test_trial_actors_are_reused_only_where_no_trial_trains_in_a_worker_group():
    """A reused trial actor once raced the previous trial's worker-group teardown (a trial went
    missing from the leaderboard). The cluster rehearsal relies on this: it runs one group."""
    assert reuse_actors([1], always_use_worker_group=False)
    assert not reuse_actors([1, 2], always_use_worker_group=False)
    assert not reuse_actors([2], always_use_worker_group=False)
    assert not reuse_actors([1], always_use_worker_group=True)


def test_a_trial_profiles_only_the_switches_its_own_settings_leave_open():
    """A confirmation the screen timed with channels_last keeps that value; one it did not
    time picks it at its start, as a `tune` trial does."""
    ctx = SimpleNamespace(profile=("channels_last", "compile"))
    assert trial_profile(ctx, {"batch_size": 8}) == ("channels_last", "compile")
    assert trial_profile(ctx, {"batch_size": 8, "channels_last": True}) == ("compile",)
    assert trial_profile(SimpleNamespace(profile=()), {"channels_last": True}) == ()
