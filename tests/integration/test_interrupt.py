"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM during a real CLI
search: running trials end `interrupted` (MLflow KILLED), the parent run is tagged, the search
stays resumable, the tool prints its own resume command, and no Ray stack dump is shown."""

from __future__ import annotations

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
DUMP_MARKS = ("Traceback", "*** SIGINT", "*** SIGTERM", "Stack trace", ".cc:", "terminate called")


class Cli:
    """A CLI subprocess in its own session whose output lines are collected as they come."""

    def __init__(self, *args: str, cwd: Path):
        env = {**os.environ, "PYTHONPATH": str(REPO), "ORCHESTRATOR_CACHE": str(cwd / "cache")}
        env.pop("RAY_ADDRESS", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], cwd=cwd,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 240) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            if any(text in line for line in self.lines):
                return
            time.sleep(0.2)
        raise AssertionError(f"no {text!r} in output:\n{self.output}")

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_stops_cleanly_and_leaves_the_search_resumable(tmp_path, signum):
    from tests.conftest import make_npz

    name = f"stopme-{signum.name.lower()}"
    spec = {"name": name, "baseline": "none",
            "data": make_npz(tmp_path / "tiny.npz"), "num_trials": 2,
            "epochs": 300, "seed": 0, "space": {"width": [0.25, 0.5]},
            "output_dir": str(tmp_path / "runs"), "tracking_uri": f"sqlite:///{tmp_path}/m.db",
            "base": {"batch_size": 16, "patch_size": 12}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    search_dir = tmp_path / "runs" / name

    cli = Cli("search", "--spec", "spec.yaml", "--max-concurrent", "1", cwd=tmp_path)
    cli.wait_for("epoch 2/300")
    if signum == signal.SIGINT:
        os.killpg(cli.proc.pid, signum)  # what Ctrl-C in a terminal does: the whole group
    else:
        cli.proc.send_signal(signum)  # `kill PID`
    code = cli.finish()
    out = cli.output
    assert code == 130, out
    assert f"orchestrator resume {search_dir}" in out
    assert "interrupted after" in out and "Tuner.restore" not in out
    assert not [m for m in DUMP_MARKS if m in out], out
    assert json.loads((search_dir / "search_state.json").read_text())["finished"] is False

    client = MlflowClient(spec["tracking_uri"])
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    parent = next(r for r in runs if r.data.tags.get("orchestrator.role") == "search")
    assert parent.data.tags.get("interrupted") == "true" and parent.info.status == "KILLED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert children and all(c.info.status == "KILLED" for c in children)
    assert {c.data.tags["status"] for c in children} == {"interrupted"}

    if signum == signal.SIGINT:  # the printed command is accepted and continues the search
        resumed = Cli("resume", str(search_dir), cwd=tmp_path)
        resumed.wait_for("resuming:")
        resumed.wait_for("epoch")
        os.killpg(resumed.proc.pid, signal.SIGINT)
        assert resumed.finish() == 130, resumed.output
