"""Stop a real CLI search anywhere, then run the `orchestrator resume DIR` it printed: the search the
user started ends whole (issue 20). Three stops, each in a driver of its own:

* Ctrl-C (SIGINT to the process group, as a terminal sends it) at epoch 2 of the baseline;
* `kill -9` of the driver's process group while its second trial trains;
* SIGTERM while the results are being written (the driver signals itself from the finish stage).

Whichever it was, after the resume: every planned trial ran exactly once, the baseline has one
row and one MLflow run (a finished baseline is not run again), every trial printed one ending
line per run, and no MLflow run is left RUNNING.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NAME, TRIALS, EPOCHS = "stopped", 2, 3
DUMP_MARKS = ("Traceback", "*** SIGINT", "*** SIGTERM", "Stack trace", ".cc:", "terminate called")
# The driver of the third case: the CLI, whose finish stage sends the driver SIGTERM once the
# leaderboard is written (as a user's `kill PID` would land there).
SIGNAL_IN_FINISH = """
import os, signal, sys
import orchestrator.finish as finish
real = finish.pareto_png
def pareto_png(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)
finish.pareto_png = pareto_png
from orchestrator.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Driver:
    """A CLI process in its own session whose output lines are collected as they come."""

    def __init__(self, *args: str, cwd: Path, code: str | None = None):
        env = {**os.environ, "PYTHONPATH": str(REPO), "ORCHESTRATOR_CACHE": str(cwd / "cache")}
        env.pop("RAY_ADDRESS", None)
        head = ["-c", code] if code else ["-m", "orchestrator"]
        self.proc = subprocess.Popen([sys.executable, *head, *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, *parts: str, timeout: float = 240) -> None:
        """Until a line holds every part."""
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            if any(all(p in line for p in parts) for line in self.lines):
                return
            time.sleep(0.05)
        raise AssertionError(f"no line with {parts} in output:\n{self.output}")

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float = 300) -> int:
        try:
            code = self.proc.wait(timeout)
            self._reader.join(10)
            return code
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)


def _start(tmp_path: Path, code: str | None = None) -> tuple[Driver, Path]:
    from tests.conftest import make_npz

    spec = {"name": NAME, "data": make_npz(tmp_path / "tiny.npz"), "num_trials": TRIALS,
            "epochs": EPOCHS, "seed": 0, "space": {"width": [0.25, 0.5]},
            "baseline": "seeds", "output_dir": "runs", "tracking_uri": "sqlite:///mlflow.db",
            # Every trial trains (2 widths, 2 trials): this test is about stops, not repeats.
            "rerun_duplicates": True, "profile": "off",
            "base": {"batch_size": 16, "patch_size": 12, "loader_workers": 0,
                     "workload": "tests.integration.faults:slow_classifier"}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return Driver("search", "--spec", "spec.yaml", cwd=tmp_path, code=code), \
        tmp_path / "runs" / NAME


def _resume(folder: Path, tmp_path: Path) -> str:
    elsewhere = tmp_path / "elsewhere"  # the printed command works from any directory
    elsewhere.mkdir()
    driver = Driver("resume", str(folder), cwd=elsewhere)
    code = driver.finish()
    assert code == 0, driver.output
    return driver.output


def _ending_lines(output: str, trial_id: str) -> list[str]:
    return [ln for ln in output.splitlines() if f"{trial_id}]" in ln and " after " in ln
            and " wall" in ln]


def _assert_whole(folder: Path, tmp_path: Path) -> dict:
    """The search ended whole; returns the leaderboard rows by role."""
    assert json.loads((folder / "search_state.json").read_text())["finished"] is True
    rows = list(csv.DictReader((folder / "leaderboard.csv").open()))
    by_role = {role: [r for r in rows if r["role"] == role] for role in ("trial", "baseline")}
    assert len(by_role["trial"]) == TRIALS and len(by_role["baseline"]) == 1, rows
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(NAME).experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert "interrupted" not in parents[0].data.tags
    assert not [r for r in runs if r.info.status == "RUNNING"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    ids = [c.data.tags["orchestrator.trial_id"] for c in children]
    assert len(ids) == len(set(ids)) == TRIALS + 1, ids  # every trial once, the baseline once
    baseline_runs = [c for c in children if c.data.tags.get("baseline") == "true"]
    assert len(baseline_runs) == 1 and baseline_runs[0].data.tags["orchestrator.role"] \
        == "baseline" and baseline_runs[0].info.status == "FINISHED"
    assert {r["trial_id"] for r in rows} == set(ids)
    return by_role


def test_ctrl_c_in_the_baseline_then_resume_runs_the_whole_search(tmp_path):
    driver, folder = _start(tmp_path)
    driver.wait_for("[baseline ", f"epoch 2/{EPOCHS}")
    os.killpg(driver.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    assert driver.finish() == 130, driver.output
    out = driver.output
    assert f"orchestrator resume {folder}" in out and "Tuner.restore" not in out
    assert not [m for m in DUMP_MARKS if m in out], out
    assert "[trial " not in out  # the search's trials had not started
    stopped = [ln for ln in out.splitlines() if ln.startswith("[baseline ") and " after " in ln]
    assert len(stopped) == 1 and " interrupted after " in stopped[0], out  # one ending line
    state = json.loads((folder / "search_state.json").read_text())
    assert state["finished"] is False and "baseline" not in state.get("stages_done", [])
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(NAME).experiment_id])
    parent = next(r for r in runs if r.data.tags.get("orchestrator.role") == "search")
    assert parent.data.tags.get("interrupted") == "true" and parent.info.status == "KILLED"
    assert {r.data.tags.get("status") for r in runs if r.data.tags.get("baseline")} \
        == {"interrupted"}

    resumed = _resume(folder, tmp_path)
    assert "resuming:" in resumed and "[baseline " in resumed  # the cut baseline runs again
    by_role = _assert_whole(folder, tmp_path)
    for row in by_role["trial"] + by_role["baseline"]:
        assert len(_ending_lines(resumed, row["trial_id"])) == 1, resumed


def test_kill_9_in_the_second_trial_then_resume_keeps_what_finished(tmp_path):
    driver, folder = _start(tmp_path)
    driver.wait_for(f"[trial 2/{TRIALS} ", "start")
    first = [ln for ln in driver.lines if ln.startswith(f"[trial 1/{TRIALS} ") and " after " in ln]
    os.killpg(driver.proc.pid, signal.SIGKILL)  # the driver and the Ray it started
    driver.finish()
    assert len(first) == 1, driver.output
    first_id = first[0].split()[2].rstrip("]")

    resumed = _resume(folder, tmp_path)
    assert "1 trial(s) already finished" in resumed, resumed
    assert "[baseline " not in resumed  # a finished baseline is not run again
    assert f"{first_id}] start" not in resumed  # nor is a finished trial
    by_role = _assert_whole(folder, tmp_path)
    assert first_id in {r["trial_id"] for r in by_role["trial"]}


def test_a_stop_while_results_are_written_is_finished_by_resume(tmp_path):
    driver, folder = _start(tmp_path, code=SIGNAL_IN_FINISH)
    assert driver.finish() == 130, driver.output
    out = driver.output
    assert f"orchestrator resume {folder}" in out and f"{TRIALS} trials: " in out
    assert not [m for m in DUMP_MARKS if m in out], out
    state = json.loads((folder / "search_state.json").read_text())
    assert state["finished"] is False
    assert state["stages_done"] == ["baseline", "tune"]

    resumed = _resume(folder, tmp_path)
    assert " start" not in resumed  # nothing trains again: only the results are written
    assert "only the results are left to write (no Ray needed)" in resumed, resumed
    _assert_whole(folder, tmp_path)
