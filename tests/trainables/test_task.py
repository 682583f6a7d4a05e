"""Your training in the loop (issue 40): your optimizer steps, autocast wraps your loss, your
augmentation runs, your score is the score; a task that cannot train is refused with one line
naming the method and the fix (no Ray)."""

from __future__ import annotations

import pytest
import torch

from orchestrator.task_check import check_task
from tests.task_examples import HalfOptimizer, NoLoss, Recording, TextScore, VectorLoss
from tests.trainables.helpers import fit_local
from trainables.data.npz import load_npz

TINY = dict(patch_size=12, width=0.5, batch_size=16, lr=0.05, epochs=2, workload="custom")


def test_your_optimizer_steps_and_your_score_is_the_score(tiny_npz):
    task = Recording()
    final = fit_local(tiny_npz, io_overrides={"task": task}, **TINY)
    (optimizer,) = task.optimizers
    state = [optimizer.state[p] for p in optimizer.param_groups[0]["params"]]
    assert all("momentum_buffer" in s for s in state)  # SGD with momentum stepped
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.param_groups[0]["lr"] < 0.05
    assert task.augmented == 2 * (240 // 16)  # every step, inside the loop
    assert 0.5 <= final["val_score"] <= 1.0 and "val_accuracy" not in final  # its own score


@pytest.mark.parametrize("precision, on, dtype", [("bf16-mixed", True, torch.bfloat16),
                                                  ("fp32", False, torch.float32)])
def test_autocast_wraps_your_forward_and_loss(tiny_npz, precision, on, dtype):
    task = Recording()
    fit_local(tiny_npz, io_overrides={"task": task}, precision=precision, **TINY)
    assert task.autocast_in_loss and set(task.autocast_in_loss) == {(on, dtype)}


@pytest.mark.parametrize("task, says", [
    (NoLoss(), "has no loss() method: add loss(outputs, batch)"),
    (VectorLoss(), "loss(outputs, batch) returned (2,), not a scalar tensor"),
    (TextScore(), "score(outputs, batch) returned str, not a number"),
    (HalfOptimizer(), "its optimizer leaves 3 of the model's parameters untrained"),
])
def test_a_task_that_cannot_train_is_named_with_its_fix(tiny_npz, task, says):
    data = load_npz(tiny_npz)
    with pytest.raises(ValueError, match=r"^task tests\.task_examples:\w+[: ]") as err:
        check_task(task, data, {"patch_size": 12, "workload": "custom"})
    assert says in str(err.value) and "\n" not in str(err.value)
    check_task(Recording(), data, {"patch_size": 12, "workload": "custom"})  # a good one passes


def test_an_error_your_code_raises_in_the_dry_run_is_a_note_not_a_refusal(tiny_npz):
    """Out of memory at some width, a store not mounted yet: the trials report such ends as
    their own; the dry run stops and says so."""
    class Raises(Recording):
        def model(self, cfg, meta):
            raise RuntimeError("the model store is not mounted yet")

    note = check_task(Raises(), load_npz(tiny_npz), {"patch_size": 12, "workload": "custom"})
    assert note.startswith("note: task tests.trainables.test_task:") and \
        "model() raised RuntimeError: the model store is not mounted yet" in note
