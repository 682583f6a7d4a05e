"""The speed profile behind the worker adapter (`trainables.trial.worker.run`), on real Ray Data
datasets in this process: its time is reported as profile_s and kept out of train_time_s, the
trial trains with its picks, a plan without it skips it, and out of memory in a candidate ends
the trial `infeasible` without training.

Needs Ray (local, from the session fixture); run under the Ray lock like integration tests.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.trainables.test_profile import sleepy_builder
from tests.trainables.test_worker import _plan, _session
from trainables.loop.profile import PICK_PREFIX, TIMED_STEPS, WARMUP_STEPS
from trainables.trial.worker import run

pytestmark = pytest.mark.integration

PROFILE = ("channels_last",)


def test_profile_time_is_reported_apart_from_training_time(ray_session, tiny_npz, tmp_path):
    # 0.5 s a step in the channels-last candidate: 3 s of profile the trial never trains with.
    build = sleepy_builder(slow_channels_last=True, seconds=0.5)
    plan, data = _plan(tiny_npz, model_builder=build, epochs=1)
    plan = dataclasses.replace(plan, profile=PROFILE)
    reports: list = []
    final = run(plan, _session(data, tmp_path, reports))
    assert final["status"] == "completed"
    for r in reports:  # every report carries the profile and its picks
        assert r[PICK_PREFIX + "channels_last"] is False
        assert r["profile_s"] >= (WARMUP_STEPS + TIMED_STEPS) * 0.5
        assert r["train_time_s"] < r["profile_s"]
    assert build.built[-1].sleeps == 0  # the trial's own model never slept


def test_a_plan_without_profile_skips_it(ray_session, tiny_npz, tmp_path):
    build = sleepy_builder(slow_channels_last=False, seconds=0.0)
    plan, data = _plan(tiny_npz, model_builder=build, epochs=1)
    reports: list = []
    run(plan, _session(data, tmp_path, reports))
    assert len(build.built) == 1  # only the trial's model: no candidate was built
    assert all("profile_s" not in r and PICK_PREFIX + "channels_last" not in r for r in reports)


def _oom_when_channels_last(cfg, meta):
    from tests.trainables.test_profile import Sleepy

    class Hungry(Sleepy):
        def forward(self, x):
            if self.channels_last():
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
            return super().forward(x)

    return Hungry(meta, slow_channels_last=False, seconds=0.0)


def test_out_of_memory_while_profiling_ends_infeasible_without_training(ray_session, tiny_npz,
                                                                        tmp_path):
    plan, data = _plan(tiny_npz, model_builder=_oom_when_channels_last)
    plan = dataclasses.replace(plan, profile=PROFILE)
    reports: list = []
    final = run(plan, _session(data, tmp_path, reports))
    assert final["status"] == "infeasible" and final["reason"].startswith("out of memory")
    assert [r["status"] for r in reports] == ["infeasible"]  # no epoch was trained
    assert final["train_time_s"] == 0.0
