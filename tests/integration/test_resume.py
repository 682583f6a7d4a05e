"""Kill a real search process with SIGKILL in the middle of a trial, then resume it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from orchestrator.trial_book import read_journal

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _cli(*args, cwd, **popen):
    env = {**os.environ, "PYTHONPATH": str(REPO), "ORCHESTRATOR_CACHE": str(cwd / "cache")}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def test_sigkilled_search_resumes_without_rerunning_or_duplicating(tmp_path):
    from tests.conftest import make_npz

    make_npz(tmp_path / "tiny.npz", n=960)
    # Relative paths: the resume below runs from another directory.
    spec = {"name": "killme", "baseline": "none", "data": "tiny.npz", "num_trials": 3,
            "epochs": 4, "seed": 3,
            "space": {"width": [0.25, 0.5]}, "output_dir": "runs",
            "tracking_uri": "sqlite:///mlflow.db",
            "base": {"batch_size": 16, "patch_size": 12},
            # Every trial trains (2 widths, 3 trials): this test is about resuming, not repeats.
            "rerun_duplicates": True}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    search_dir = tmp_path / "runs" / "killme"
    journal = search_dir / "trials.jsonl"

    # A new session: SIGKILL to the group takes the driver and the Ray it started.
    proc = _cli("search", "--spec", "spec.yaml", cwd=tmp_path, start_new_session=True)
    deadline = time.time() + 240
    try:
        # Wait until one trial finished and the next one started.
        while time.time() < deadline and proc.poll() is None:
            finished, cut_short = read_journal(journal)
            if finished and cut_short:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read()
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    finished, cut_short = read_journal(journal)
    finished_before = set(finished)
    assert 1 <= len(finished_before) < 3 and len(cut_short) == 1

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = _cli("resume", str(search_dir), cwd=elsewhere)
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    assert f"{len(finished_before)} trial(s) already finished" in output
    # Trials finished before the kill are not run again.
    for trial_id in finished_before:
        assert f"{trial_id}] start" not in output

    board = (search_dir / "leaderboard.csv").read_text().splitlines()
    assert len(board) == 1 + 3  # header + every trial exactly once
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("killme")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    trial_ids = [c.data.tags["orchestrator.trial_id"] for c in children]
    assert len(trial_ids) == len(set(trial_ids)) == 3  # no duplicate runs
    assert finished_before <= set(trial_ids) and not set(cut_short) & set(trial_ids)
    assert {c.info.status for c in children} == {"FINISHED"}
    assert json.loads((search_dir / "search_state.json").read_text())["finished"] is True
