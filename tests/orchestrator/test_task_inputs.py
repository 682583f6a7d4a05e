"""A task that cannot train is bad input (issue 40): `orchestrator search --task module:Class`
refuses it with one line naming the method and its fix, exit code 2, before Ray starts (this
test is in the fast tier, which refuses Ray). A good task passes `--check`."""

from __future__ import annotations

import pytest

from orchestrator.cli import main


@pytest.mark.parametrize("task, says", [
    ("NoLoss", "no loss() method"),
    ("VectorLoss", "not a scalar tensor"),
    ("TextScore", "not a number"),
    ("HalfOptimizer", "parameters untrained"),
])
def test_a_bad_task_is_one_line_and_exit_2(tiny_npz, in_tmp, capsys, task, says):
    code = main(["search", "--task", f"tests.task_examples:{task}", "--data", tiny_npz,
                 "--set", "patch_size=12", "--strategy", "screen", "--full-epochs", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"orchestrator: error: task tests.task_examples:{task}")
    assert says in err[0]
    assert not (in_tmp / "orchestrator_runs").exists()  # nothing started, nothing written


def test_a_good_task_passes_the_check_and_its_class_is_the_task(tiny_npz, in_tmp, capsys):
    assert main(["search", "--check", "--task", "tests.task_examples:Small", "--data", tiny_npz,
                 "--set", "patch_size=12"]) == 0
    # With a task and a model both, the task would build its model: refused.
    assert main(["search", "--task", "tests.task_examples:Small", "--data", tiny_npz,
                 "--model", "examples.bring_your_own:build"]) == 2
    assert "give a task or a model, not both" in capsys.readouterr().err


def test_a_history_baseline_that_cannot_be_read_is_one_line_and_exit_2(tiny_npz, in_tmp,
                                                                       capsys):
    """A run id the store does not hold, a CSV without a score column: refused before any
    work (issue 41)."""
    from tests.conftest import sqlite_store

    uri = sqlite_store(in_tmp)
    capsys.readouterr()  # (MLflow's own lines, making the store)
    (in_tmp / "today.csv").write_text("epoch,seconds,accuracy\n1,2.0,0.5\n")
    for baseline, says in ((f"runs:/{'0' * 32}", "no such run in the MLflow store"),
                           ("today.csv", "no 'score' column")):
        code = main(["search", "--data", tiny_npz, "--baseline", baseline, "--tracking-uri",
                     uri, "--strategy", "screen", "--set", "patch_size=12"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and says in err[0], err
