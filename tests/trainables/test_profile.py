"""The speed profile (`trainables.loop.profile`) without Ray: it picks the faster candidate by
measurement, judges compile by its one-off cost over the trial's steps, leaves what is learned
untouched, ends on out of memory, and profiles only what it may.

Run: python -m pytest -q tests/trainables/test_profile.py
"""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from tests.trainables.helpers import fit_local
from trainables.loop.task import ModelTask
from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.loop.io import LoopIO
from trainables.loop.profile import (PICK_PREFIX, START_STEP, TIMED_STEPS, WARMUP_STEPS,
                                     Timing, _profile_batch, candidates, profile,
                                     switches_to_profile, time_step)
from trainables.status import TrialStatus, status_of

SMALL = {"width": 0.25, "batch_size": 16, "patch_size": 12, "epochs": 1}


class Sleepy(nn.Module):
    """A tiny conv net whose steps sleep in one memory layout: an artificially slow candidate.
    The layout is read from a 4x4 conv weight (with one input channel, NCHW and NHWC strides
    coincide, so the input cannot tell)."""

    def __init__(self, meta: DataMeta, slow_channels_last: bool, seconds: float):
        super().__init__()
        self.conv1 = nn.Conv2d(meta.in_channels, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.head = nn.Linear(4, meta.num_classes)
        self.slow_channels_last, self.seconds = slow_channels_last, seconds
        self.sleeps = 0

    def channels_last(self) -> bool:
        w = self.conv2.weight
        return w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous()

    def forward(self, x):
        if self.channels_last() == self.slow_channels_last:
            self.sleeps += 1
            time.sleep(self.seconds)
        h = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.head(h.mean((2, 3)))


# Far above a tiny step's time even on a loaded 2-core machine, where a step can stall for tens
# of milliseconds: the slow candidate must lose by a margin no scheduler noise can close.
SLEEP_S = 0.25


def sleepy_builder(slow_channels_last: bool, seconds: float = SLEEP_S):
    built: list[Sleepy] = []

    def build(cfg, meta):
        built.append(Sleepy(meta, slow_channels_last, seconds))
        return built[-1]

    build.built = built
    return build


@pytest.mark.parametrize("slow_channels_last", [True, False])
def test_picks_the_candidate_that_is_not_made_slower(tiny_npz, slow_channels_last):
    build = sleepy_builder(slow_channels_last)
    result = fit_local(tiny_npz, profile=("channels_last",), workload="custom",
                       io_overrides={"task": ModelTask(build)}, **SMALL)
    assert result[PICK_PREFIX + "channels_last"] is (not slow_channels_last)
    # Each candidate ran warm-up and timed steps on its own model; then the trial's own model.
    assert len(build.built) == 3
    assert build.built[0].sleeps + build.built[1].sleeps == WARMUP_STEPS + TIMED_STEPS
    assert build.built[2].sleeps == 0  # the trial trained with the fast pick
    assert result["profile_s"] >= (WARMUP_STEPS + TIMED_STEPS) * SLEEP_S


def _weights(npz, **kwargs) -> tuple[dict, dict]:
    """(the trained weights, the final metrics)."""
    saved: list = []
    result = fit_local(npz, io_overrides={"save_checkpoint": lambda state, m: saved.append(state)},
                       **kwargs)
    return saved[-1]["model"], result


@pytest.mark.parametrize("pick", [False, True])
def test_profile_leaves_what_is_learned_identical(tiny_npz, pick):
    """Same picks, profile on or off: bit-identical weights after training."""
    forced = lambda cfg: Timing(1.0 if cfg.channels_last != pick else 0.5, 0.0)  # noqa: E731
    on, result = _weights(tiny_npz, profile=("channels_last",), measure=forced, **SMALL)
    assert result[PICK_PREFIX + "channels_last"] is pick
    off, _ = _weights(tiny_npz, channels_last=pick, **SMALL)
    # And the real timer (throwaway models, real steps) changes nothing either.
    real, timed = _weights(tiny_npz, profile=("channels_last",), **SMALL)
    ref, _ = _weights(tiny_npz, channels_last=timed[PICK_PREFIX + "channels_last"], **SMALL)
    for a, b in ((on, off), (real, ref)):
        assert a.keys() == b.keys()
        assert [k for k in a if not torch.equal(a[k], b[k])] == []


def _io(steps: int = 10) -> LoopIO:
    batch = (torch.randn(8, 1, 12, 12), torch.randint(0, 3, (8,)))
    return LoopIO(train_batches=lambda e: iter(()), val_batches=lambda: iter([batch]),
                  steps_per_epoch=steps)


META = DataMeta(1, 3)


@pytest.mark.parametrize("epochs, compiled", [(1, False), (300, True)])
def test_compile_is_judged_with_its_one_off_cost_spread_over_the_planned_steps(epochs, compiled):
    """Compile halves the step (0.02 -> 0.01 s) but costs 20 s once: it pays back only over
    more than 2000 steps (10 per epoch here)."""
    def measure(cfg):
        return Timing(0.01, 20.0) if cfg.compile else Timing(0.02, 0.1)

    found = profile(TrialConfig(epochs=epochs), META, _io(), ("compile",), measure)
    assert found.picks["compile"] is compiled
    assert found.seconds >= 0 and found.estimates


def test_a_setting_is_timed_once_and_timing_stops_where_it_cannot_pay_back():
    calls = []

    def measure(cfg):
        calls.append((cfg.channels_last, cfg.compile))
        time.sleep(0.05)  # what timing a candidate costs: a build, warm-up, timed steps
        return Timing(0.02 if cfg.channels_last else 0.01, 0.0)

    switches = ("channels_last", "compile")
    # A long trial: every switch is timed, the config's own setting once (it is also compile's
    # own value at the pick channels_last=False).
    found = profile(TrialConfig(epochs=100_000), META, _io(steps=10), switches, measure)
    assert calls == [(False, False), (True, False), (False, True)]
    assert found.picks == {"channels_last": False, "compile": False} and found.untimed == ()
    # 2 steps of 10 ms: timing compile (0.05 s, as channels_last's alternative cost) would take
    # more than half of the trial's 0.02 s of training. The first switch is always timed.
    calls.clear()
    found = profile(TrialConfig(epochs=1), META, _io(steps=2), switches, measure)
    assert calls == [(False, False), (True, False)]
    assert found.picks == {"channels_last": False} and found.untimed == ("compile",)


def test_out_of_memory_in_a_candidate_ends_the_trial_infeasible():
    def measure(cfg):
        if cfg.channels_last:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return Timing(0.01, 0.0)

    with pytest.raises(torch.OutOfMemoryError) as err:
        profile(TrialConfig(), META, _io(), ("channels_last",), measure)
    assert status_of(err.value).status == TrialStatus.INFEASIBLE


def test_another_error_in_a_candidate_only_drops_it():
    def measure(cfg):
        if cfg.compile:
            raise RuntimeError("no C++ compiler here")
        return Timing(0.01, 0.0)

    found = profile(TrialConfig(), META, _io(), ("compile",), measure)
    assert found.picks == {"compile": False}


def test_an_error_with_the_configs_own_values_is_the_trials_error():
    # A model builder that fails is not hidden by the next candidate's build that works.
    calls = []

    def measure(cfg):
        calls.append(cfg.channels_last)
        if len(calls) == 1:
            raise RuntimeError("the model store is not mounted yet")
        return Timing(0.01, 0.0)

    with pytest.raises(RuntimeError, match="not mounted"):
        profile(TrialConfig(), META, _io(), ("channels_last",), measure)
    assert calls == [False]  # the config's own value, first; nothing timed after it failed


def test_only_what_may_matter_is_profiled():
    on = switches_to_profile("on", set(), {})
    assert on == ("channels_last", "cudnn_benchmark")  # compile only when allowed
    assert switches_to_profile("off", set(), {}) == ()
    assert "compile" in switches_to_profile("compile", set(), {})
    assert "compile" in switches_to_profile("on", set(), {"compile": True})  # the config asks
    # A switch the user pinned or the space searches is never profiled.
    assert "channels_last" not in switches_to_profile("on", {"channels_last"}, {})
    assert "compile" not in switches_to_profile("compile", {"compile"}, {})
    cpu, cfg = torch.device("cpu"), TrialConfig(channels_last=True)
    sets = candidates(cfg, META, cpu, ("channels_last", "compile", "cudnn_benchmark"))
    assert "cudnn_benchmark" not in sets  # no cuDNN on CPU
    assert sets["channels_last"][0] == {"channels_last": True}  # the config's own value first
    assert sets["compile"] == [{"compile": False}, {"compile": True, "compile_mode": "default"}]
    chosen = TrialConfig(compile_mode="max-autotune")  # a mode the user chose is the one timed
    assert candidates(chosen, META, cpu, ("compile",))["compile"][1:] == [
        {"compile": True, "compile_mode": "max-autotune"}]
    for dims in (0, 1):  # feature vectors and signals have no channels-last layout
        assert candidates(cfg, DataMeta(1, 3, spatial_dims=dims), cpu, ("channels_last",)) == {}
    assert profile(cfg, DataMeta(1, 3, spatial_dims=1), _io(), ("channels_last",)).picks == {}


@pytest.mark.parametrize("val_samples, label_shape", [(1, ()), (3, (12, 12))])
def test_the_profile_times_the_trials_batch_even_from_a_smaller_validation_set(
        val_samples, label_shape):
    """unet3d validates on one volume: its steps must still be timed at the training batch
    (the layouts rank differently at batch 1), with labels of the matching shape."""
    x = torch.randn(val_samples, 1, 12, 12)
    y = torch.randint(0, 3, (val_samples, *label_shape))
    io = LoopIO(train_batches=lambda e: iter(()), val_batches=lambda: iter([(x, y)]),
                steps_per_epoch=10)
    bx, by = _profile_batch(io, 8)
    assert bx.shape == (8, 1, 12, 12) and by.shape == (8, *label_shape)
    assert torch.equal(bx[:val_samples], x) and torch.equal(by[:val_samples], y)
    bx, by = _profile_batch(io, 2)  # filled or cut to the batch
    assert len(bx) == len(by) == 2


def test_the_profile_reports_its_picks_step_and_time_step_times_a_config():
    def measure(cfg):
        return Timing(0.02 if cfg.channels_last else 0.01, 0.0)

    found = profile(TrialConfig(epochs=3), META, _io(), ("channels_last",), measure)
    assert found.picks == {"channels_last": False} and found.step_s == 0.01
    assert found.metrics()[START_STEP] == 0.01  # reported, to re-time the trial's prediction
    # With nothing to profile, a confirmation times its own step: a real (tiny) model here.
    step = time_step(TrialConfig(batch_size=8, width=0.25, patch_size=12), META, _io())
    assert step is not None and 0 < step < 5
    empty = LoopIO(train_batches=lambda e: iter(()), val_batches=lambda: iter(()),
                   steps_per_epoch=1)
    assert time_step(TrialConfig(batch_size=8), META, empty) is None


@pytest.mark.parametrize("workload, meta, x, y", [
    ("classifier", META, torch.randn(8, 1, 12, 12), torch.randint(0, 3, (8,))),
    ("unet3d", DataMeta(1, 2, "segment", 3), torch.randn(2, 1, 16, 16, 16),
     torch.randint(0, 2, (2, 1, 16, 16, 16))),
])
@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_a_cpu_timing_frees_its_model_without_a_full_collection(
        monkeypatch, workload, meta, x, y, precision):
    """A screen times dozens of candidates in one process: on a CPU each one's model and step
    must be freed by their references alone (a full collection there cost a third of the
    screen's time), so a reference cycle creeping into a model or step would pile up models."""
    import gc
    import weakref

    import trainables.loop.profile as profile_module

    from trainables.loop.task import task_for

    built, collections = [], []
    task = task_for(workload, meta.task)
    build = task.model

    def spy(*args, **kwargs):
        model = build(*args, **kwargs)
        built.append(weakref.ref(model))
        return model

    monkeypatch.setattr(task, "model", spy)
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(a) or 0)
    cfg = TrialConfig.from_dict({"workload": workload, "precision": precision,
                                 "batch_size": len(y), "width": 0.25,
                                 "patch_size": x.shape[-1]})
    io = LoopIO(train_batches=lambda e: iter(()), val_batches=lambda: iter(()),
                steps_per_epoch=10, task=task)
    timing = profile_module.StepTimer(meta, io, (x, y))(cfg)
    assert timing.step_s > 0 and collections == []
    assert len(built) == 1 and built[0]() is None  # freed as the timer returned
