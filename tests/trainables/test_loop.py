"""Each switch of the training loop does what it claims (run without Ray, on tiny data)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from tests.trainables.helpers import fit_local
from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.models import build_classifier
from trainables.workloads import WORKLOADS, Workload

TINY = dict(patch_size=12, width=0.5, batch_size=16, lr=1e-2)


def test_loop_learns_and_reports_every_epoch(tiny_npz):
    reports: list[dict] = []
    final = fit_local(tiny_npz, reports, epochs=3, **TINY)
    assert [r["epoch"] for r in reports] == [1, 2, 3]
    assert final["status"] == "completed" and final["done"] is True
    assert final["val_accuracy"] > 0.8  # 3 quadrant classes under noise: easy
    assert final["train_time_s"] > 0 and final["samples_per_s"] > 0
    assert 0 <= final["data_wait_frac"] < 1 and final["peak_mem_mb"] > 0
    assert final["samples"] == 3 * (240 // 16) * 16


def _autocast_probe(monkeypatch):
    seen: list[torch.dtype] = []

    def builder(cfg, meta):
        model = build_classifier(cfg, meta)
        first_conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
        first_conv.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
        return model

    monkeypatch.setitem(WORKLOADS, "probe", Workload(data=lambda: None, model=builder))
    return seen


@pytest.mark.parametrize(("precision", "dtype"), [("bf16-mixed", torch.bfloat16),
                                                  ("fp32", torch.float32)])
def test_autocast_dtype_inside_forward(tiny_npz, monkeypatch, precision, dtype):
    seen = _autocast_probe(monkeypatch)
    fit_local(tiny_npz, epochs=1, workload="probe", precision=precision, **TINY)
    assert seen and set(seen) == {dtype}


@pytest.mark.parametrize("accum", [1, 3])
def test_accumulation_steps_give_the_expected_optimizer_steps(tiny_npz, accum):
    final = fit_local(tiny_npz, epochs=2, accum_steps=accum, **TINY)
    micro_per_epoch = 240 // 16  # 15
    assert final["optimizer_steps"] == 2 * math.ceil(micro_per_epoch / accum)


def test_gradient_checkpointing_stores_fewer_activations():
    def saved_bytes(checkpointing: bool) -> int:
        cfg = TrialConfig(grad_checkpointing=checkpointing, width=1.0)
        model = build_classifier(cfg, DataMeta(1, 10)).train()
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(torch.randn(8, 1, 32, 32)).sum().backward()
        return total

    plain, checkpointed = saved_bytes(False), saved_bytes(True)
    assert checkpointed < 0.6 * plain, (plain, checkpointed)


def test_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    x = torch.randn(4, 1, 16, 16)
    grads = []
    for flag in (False, True):
        torch.manual_seed(1)
        model = build_classifier(TrialConfig(grad_checkpointing=flag), DataMeta(1, 3)).train()
        model(x).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


def test_early_stopping_stops(tiny_npz):
    reports: list[dict] = []
    # lr=0 cannot improve after the first validation, so patience 1 stops at epoch 2.
    fit_local(tiny_npz, reports, epochs=6, early_stop_patience=1, **{**TINY, "lr": 1e-12})
    assert reports[-1]["status"] == "early_stopped"
    assert len(reports) == 2


def test_the_legacy_loop_keeps_the_same_early_stopping_rule(tiny_npz):
    # The baseline trains "until it stops improving" as the optimized loop would.
    from tests.trainables.helpers import fit_legacy_local

    reports: list[dict] = []
    fit_legacy_local(tiny_npz, reports, epochs=6, early_stop_patience=1,
                     **{**TINY, "lr": 1e-12, "loader_workers": 0})
    assert reports[-1]["status"] == "early_stopped"
    assert len(reports) == 2


def test_divergence_is_a_status_not_a_crash(tiny_npz):
    reports: list[dict] = []
    final = fit_local(tiny_npz, reports, epochs=3, sync_every=2, **{**TINY, "lr": 1e6})
    assert final["status"] == "diverged" and final["done"] is True
    assert len(reports) < 3 or not math.isfinite(reports[-1]["train_loss"])


def test_validate_every_n_epochs_skips_validation(tiny_npz):
    reports: list[dict] = []
    fit_local(tiny_npz, reports, epochs=3, val_every=2, **TINY)
    assert reports[0]["eval_time_s"] == 0.0
    assert reports[1]["eval_time_s"] > 0 and reports[2]["eval_time_s"] > reports[1]["eval_time_s"]


def test_a_loss_gate_skips_validation_until_the_loss_comes_down(tiny_npz):
    # The search's confirmations validate only where the target can be reached (their loss
    # near the baseline's there) or from where the stopper compares scores.
    free: list[dict] = []
    fit_local(tiny_npz, free, epochs=4, **TINY)
    losses = [r["train_loss"] for r in free]
    assert losses[2] < min(losses[:2])  # it learns: a gate can fall between
    gated: list[dict] = []
    fit_local(tiny_npz, gated, epochs=4, val_skip_above_loss=(losses[2] + min(losses[:2])) / 2,
              val_skip_until=1.0, **TINY)
    assert [r["val_epoch"] for r in gated] == [0, 0, 3, 4]
    assert gated[1]["eval_time_s"] == 0.0 < gated[2]["eval_time_s"]
    assert [r["train_loss"] for r in gated] == pytest.approx(losses)  # training is untouched
    assert gated[-1]["val_score"] == pytest.approx(free[-1]["val_score"])


def test_a_loss_gate_ends_where_the_schedule_says(tiny_npz):
    reports: list[dict] = []
    fit_local(tiny_npz, reports, epochs=4, val_skip_above_loss=1e-9, val_skip_until=0.5, **TINY)
    assert [r["val_epoch"] for r in reports] == [0, 2, 3, 4]


def test_a_restarted_worker_resumes_from_the_last_checkpoint(tiny_npz):
    saved: list[dict] = []
    first: list[dict] = []

    def save(state, metrics):
        saved.append(state)
        first.append(metrics)
        if metrics["epoch"] == 2:
            raise RuntimeError("worker killed")  # dies right after checkpointing epoch 2

    with pytest.raises(RuntimeError, match="worker killed"):
        fit_local(tiny_npz, epochs=4, io_overrides={"save_checkpoint": save}, **TINY)
    resumed: list[dict] = []
    final = fit_local(tiny_npz, epochs=4, io_overrides={
        "save_checkpoint": lambda state, m: resumed.append(m),
        "load_checkpoint": lambda: saved[-1]}, **TINY)
    assert [m["epoch"] for m in resumed] == [3, 4]
    assert final["restarts"] == 1 and final["status"] == "completed"
    assert final["optimizer_steps"] == 4 * (240 // 16)
    assert final["train_time_s"] > first[-1]["train_time_s"]  # timers carry over


def _checkpointed(tiny_npz, epochs: int, **settings) -> tuple[list[dict], list[dict]]:
    """(each epoch's checkpoint, each epoch's report) of a whole run."""
    saved: list[dict] = []
    reports: list[dict] = []
    fit_local(tiny_npz, epochs=epochs, io_overrides={  # a copy, as a saved file is
        "save_checkpoint": lambda state, m: (saved.append(copy.deepcopy(state)),
                                             reports.append(m))},
        **settings)
    return saved, reports


WSD = dict(TINY, schedule="wsd", warmup_epochs=1.0, patch_size=8)


def test_a_run_that_goes_on_from_a_longer_plans_checkpoint_is_the_whole_run(tiny_npz):
    # A 6-epoch contender on wsd stopped after epoch 2; the 4-epoch run with its warm-up goes on
    # from there. Epoch for epoch it is the 4-epoch run trained whole (same losses, same scores):
    # the measured run of the race's winner (orchestrator/measure.py). Random crops (patch 8 of
    # 16) check that the crop generator goes on too.
    contender, _ = _checkpointed(tiny_npz, 6, **WSD)
    _, whole = _checkpointed(tiny_npz, 4, **WSD)
    went_on: list[dict] = []
    fit_local(tiny_npz, epochs=4, io_overrides={
        "save_checkpoint": lambda state, m: went_on.append(m),
        "load_checkpoint": lambda: {**contender[1], "continued": True}}, **WSD)
    assert [m["epoch"] for m in went_on] == [3, 4]
    for mine, theirs in zip(went_on, whole[2:], strict=True):
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-5)
        assert mine["val_score"] == pytest.approx(theirs["val_score"], rel=1e-5)
        assert mine["lr"] == pytest.approx(theirs["lr"], rel=1e-9)
    assert went_on[-1]["continued_from"] == 2 and went_on[-1]["restarts"] == 0
    assert went_on[-1]["optimizer_steps"] == whole[-1]["optimizer_steps"]
    assert went_on[-1]["train_time_s"] > contender[1]["state"]["train_time"]  # one clock


def test_a_longer_run_goes_on_from_a_shorter_runs_checkpoint_at_its_decay(tiny_npz):
    # A measured run of 5 epochs on wsd missed; the next length (a quarter longer: 7) goes on
    # from the checkpoint it kept where its decay began (orchestrator/measure.py decay_epoch),
    # and is, epoch for epoch, the 7-epoch run trained whole.
    from orchestrator.measure import attempts, decay_epoch

    shorter = {"epochs": 5, **WSD}
    keep = decay_epoch(shorter)
    longer = attempts(5, 9, branches=True)[1]
    assert (keep, longer) == (3, 7)
    saved, _ = _checkpointed(tiny_npz, 5, **WSD)
    _, whole = _checkpointed(tiny_npz, longer, **WSD)
    went_on: list[dict] = []
    fit_local(tiny_npz, epochs=longer, io_overrides={
        "save_checkpoint": lambda state, m: went_on.append(m),
        "load_checkpoint": lambda: {**saved[keep - 1], "continued": True}}, **WSD)
    assert [m["epoch"] for m in went_on] == [4, 5, 6, 7]
    for mine, theirs in zip(went_on, whole[keep:], strict=True):
        assert mine["lr"] == pytest.approx(theirs["lr"], rel=1e-9)
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-5)
        assert mine["val_score"] == pytest.approx(theirs["val_score"], rel=1e-5)
    assert went_on[-1]["continued_from"] == keep
    # One epoch later the shorter run's next lr was its decay's: the longer one trains from
    # scratch.
    from trainables.loop.resume import why_not_continued

    assert "left this run's" in why_not_continued(TrialConfig(epochs=longer, **WSD),
                                                  saved[keep], 240 // 16)


ONECYCLE = dict(WSD, schedule="onecycle", warmup_epochs=None)


@pytest.mark.parametrize(("checkpoint_epoch", "before", "settings", "why"), [
    (4, WSD, WSD, "left this run's"),  # the 6-epoch plan decays from 4.0 epochs: past this run's
    (2, ONECYCLE, ONECYCLE, "left this run's"),  # onecycle warms up over a share of its length
    (2, dict(WSD, lr=2e-2), WSD, "another configuration")])
def test_a_run_trains_from_scratch_where_the_checkpoint_is_not_its_first_epochs(
        tiny_npz, checkpoint_epoch, before, settings, why):
    from trainables.loop.resume import why_not_continued

    contender, _ = _checkpointed(tiny_npz, 6, **before)
    saved = contender[checkpoint_epoch - 1]
    assert why in why_not_continued(TrialConfig(epochs=5, **settings), saved, 240 // 16)
    reports: list[dict] = []
    fit_local(tiny_npz, reports, epochs=5, io_overrides={
        "load_checkpoint": lambda: {**saved, "continued": True}}, **settings)
    assert [m["epoch"] for m in reports] == [1, 2, 3, 4, 5]
    assert reports[-1]["continued_from"] == 0


def test_legacy_and_optimized_loops_reach_comparable_accuracy(tiny_npz):
    from tests.trainables.helpers import fit_legacy_local

    settings = dict(epochs=3, **TINY)
    optimized = fit_local(tiny_npz, **settings)
    legacy = fit_legacy_local(tiny_npz, loader_workers=1, **settings)
    assert legacy["status"] == optimized["status"] == "completed"
    assert legacy["optimizer_steps"] == optimized["optimizer_steps"]
    assert abs(legacy["val_accuracy"] - optimized["val_accuracy"]) <= 0.1
    assert optimized["val_accuracy"] > 0.8


def test_segmentation_task_learns_and_reports_dice():
    from trainables.loop import LoopIO, fit
    from trainables.data.volumes import synthetic_volumes

    data = synthetic_volumes(n_train=1, n_val=1, size=48)
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    cfg = TrialConfig(workload="unet3d", epochs=2, patch_size=16, width=0.5, batch_size=2)
    reports: list[dict] = []
    io = LoopIO(train_batches=lambda e: ((x[i:i + 2], y[i:i + 2]) for i in range(0, len(x) - 1, 2)),
                val_batches=lambda: [(xv, yv)], steps_per_epoch=len(x) // 2, report=reports.append)
    final = fit(cfg, data.meta(), io)
    assert final["status"] == "completed"
    assert 0 < final["val_dice"] <= 1 and 0 < final["val_iou"] <= final["val_dice"]
    assert final["val_score"] == final["val_dice"]
