"""An error inside a running search is not bad input (issue 20, item 9): it names the stage that
failed, the error with its path, and the file that holds the full traceback; it exits 3, not 2;
what the search recorded stays, and the printed resume command finishes it once fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_a_failure_while_writing_results_is_a_failed_stage_not_bad_input(
        ray_session, tiny_npz, in_tmp, monkeypatch, capsys):
    import orchestrator.finish as finish
    from orchestrator.api import resume_search
    from orchestrator.cli import main

    def vanished(*args, **kwargs):  # what a job's deleted working directory looks like
        raise FileNotFoundError(2, "No such file or directory", "/tmp/job_dir/vanished")

    real = finish.pareto_png
    monkeypatch.setattr(finish, "pareto_png", vanished)
    code = main(["search", "--name", "broken", "--data", tiny_npz, "--trials", "1",
                 "--epochs", "1", "--baseline", "none", "--profile", "off",
                 "--set", "patch_size=12", "--set", "batch_size=16"])
    err = capsys.readouterr().err
    folder = in_tmp / "orchestrator_runs" / "broken"
    assert code == 3, err
    assert "orchestrator: error:" not in err  # not dressed up as bad input
    assert "failed in its finish stage: FileNotFoundError" in err
    assert "/tmp/job_dir/vanished" in err  # what failed, with its path
    log = folder / "error.log"
    assert f"full traceback: {log}" in err and "Traceback" in log.read_text()
    assert f"orchestrator resume {folder}" in err
    state = json.loads((folder / "search_state.json").read_text())
    assert state["finished"] is False and state["stages_done"] == ["baseline", "tune"]

    monkeypatch.setattr(finish, "pareto_png", real)  # fixed: the resume finishes the search
    result = resume_search(folder)
    assert len(result.trials) == 1 and result.trials.iloc[0]["status"] == "completed"
    assert Path(result.leaderboard_path).is_file()
