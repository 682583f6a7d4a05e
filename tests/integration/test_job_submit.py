"""`ray job submit --working-dir . -- python -m orchestrator search ...` against a real Ray head.

The test starts its own head on 127.0.0.1 (dashboard and job server included) with token
authentication on and a private token, submits a tiny search with the Ray CLI, waits for
SUCCEEDED, checks the MLflow records, and stops the head. Run:
    python -m pytest -q tests/integration/test_job_submit.py
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")
ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")  # where Ray's CLI looks for "the" cluster


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head of our own: private temp dir, free ports, our own token; always stopped."""
    # Short path: Ray's unix sockets live under the temp dir (108-byte limit).
    temp_dir = Path(tempfile.mkdtemp(prefix="rayhead-", dir="/tmp"))
    token_file = temp_dir / "auth_token"
    token_file.write_text(secrets.token_hex(32))
    token_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "PYTHONPATH")}
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file),
            # The job's `python` must be the one that has this project's dependencies.
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    gcs, dash, client, agent, agent_grpc, metrics, runtime_env, node_mgr, obj_mgr = _free_ports(9)
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         "--dashboard-host=127.0.0.1", "--include-dashboard=true", "--num-cpus=2",
         f"--temp-dir={temp_dir}", f"--port={gcs}", f"--dashboard-port={dash}",
         f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
         f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
         f"--runtime-env-agent-port={runtime_env}", f"--node-manager-port={node_mgr}",
         f"--object-manager-port={obj_mgr}", "--disable-usage-stats"],
        env=env, stdout=open(temp_dir / "head.out", "w"), stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so teardown stops exactly what it started
    )
    try:
        url = f"http://127.0.0.1:{dash}"
        deadline = time.monotonic() + 90
        while True:
            assert head.poll() is None, (temp_dir / "head.out").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{url}/api/version", timeout=2)
                break
            except urllib.error.HTTPError:  # up, and refusing us without a token
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray head's dashboard did not come up"
                time.sleep(1)
        yield {"url": url, "env": env, "token_file": token_file, "temp_dir": temp_dir}
    finally:
        _stop(head, temp_dir)
        # Our head wrote its address only under its own temp dir, never where other Ray users
        # on this machine would find it.
        after = ADDRESS_FILE.read_text() if ADDRESS_FILE.exists() else None
        assert after is None or f":{gcs}" not in after
        shutil.rmtree(temp_dir, ignore_errors=True)


def _stop(head: subprocess.Popen, temp_dir: Path) -> None:
    """SIGTERM to `ray start --block` stops the node's processes; then anything left that we
    started (our process group, or a process naming our private temp dir) is killed by pid."""
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=10)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(temp_dir).encode() in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except OSError:  # gone already, or not ours to read
            pass


def _ray(args: list[str], env: dict, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_job_server_refuses_a_wrong_token(ray_head):
    env = {**ray_head["env"], "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env.pop("RAY_AUTH_TOKEN_PATH")
    listed = _ray(["job", "list", "--address", ray_head["url"]], env)
    assert listed.returncode != 0
    assert "401" in listed.stdout + listed.stderr or "uthenticat" in listed.stdout + listed.stderr


def test_submitted_search_succeeds_and_records_mlflow_runs(ray_head, tmp_path):
    from tests.conftest import make_npz

    data = make_npz(tmp_path / "tiny.npz")
    spec = tmp_path / "tiny.yaml"  # one fixed config: nothing to sample
    spec.write_text("space: {}\nbaseline: none\n"
                    "base: {width: 0.25, batch_size: 16, lr: 0.01, patch_size: 12}\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    job_id = f"it-job-{secrets.token_hex(4)}"
    submit = _ray(
        ["job", "submit", "--address", ray_head["url"], "--submission-id", job_id,
         "--working-dir", ".", "--",
         "python", "-m", "orchestrator", "search", "--spec", str(spec), "--name", "it-job",
         "--data", data, "--trials", "1", "--epochs", "1", "--placement", "PACK",
         "--tracking-uri", uri, "--output-dir", str(tmp_path / "runs")],
        ray_head["env"], timeout=300,
    )
    status = _ray(["job", "status", "--address", ray_head["url"], job_id], ray_head["env"])
    assert "succeeded" in (status.stdout + status.stderr).lower(), \
        (submit.stdout + submit.stderr)[-6000:] + status.stdout + status.stderr
    assert submit.returncode == 0
    assert "Leaderboard" in submit.stdout  # the job's own output, tailed by the CLI

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("it-job")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 1 and children[0].info.status == "FINISHED"
    assert children[0].data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert children[0].data.tags["status"] == "completed"
    assert "final_val_accuracy" in children[0].data.metrics
    assert (tmp_path / "runs" / "it-job" / "leaderboard.csv").is_file()
    # Artifacts live beside the SQLite store, not in the job's working dir (Ray deletes it).
    assert {"leaderboard.csv", "spec.yaml"} <= \
        {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert parents[0].info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())


def test_submitted_consecutive_worker_group_trials_all_reach_the_leaderboard(ray_head, tmp_path):
    """Trials of 2 workers, one after another on one joined head: each is a row and an MLflow
    run (a reused trial actor used to race the previous trial's worker-group teardown)."""
    import pandas as pd

    from tests.conftest import make_npz

    data = make_npz(tmp_path / "tiny.npz")
    spec = tmp_path / "two-workers.yaml"
    lrs = [0.005, 0.01, 0.02]
    spec.write_text("baseline: none\n"  # this test counts the search's own trials
                    f"space: {{lr: {lrs}}}\n"
                    "base: {workers: 2, width: 0.25, batch_size: 16, patch_size: 12}\n"
                    f"warm_start: {[{'lr': lr} for lr in lrs]}\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    job_id = f"it-wg-{secrets.token_hex(4)}"
    submit = _ray(
        ["job", "submit", "--address", ray_head["url"], "--submission-id", job_id,
         "--working-dir", ".", "--",
         "python", "-m", "orchestrator", "search", "--spec", str(spec), "--name", "it-wg",
         "--data", data, "--trials", "3", "--epochs", "1", "--tracking-uri", uri,
         "--output-dir", str(tmp_path / "runs")],
        ray_head["env"], timeout=420,
    )
    log = (submit.stdout + submit.stderr)[-6000:]
    assert submit.returncode == 0, log
    assert "3 trials: 3 completed" in submit.stdout, log
    board = pd.read_csv(tmp_path / "runs" / "it-wg" / "leaderboard.csv")
    assert sorted(board["lr"]) == lrs and set(board["status"]) == {"completed"}, log
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("it-wg")
    children = [r for r in client.search_runs([exp.experiment_id])
                if r.data.tags.get("mlflow.parentRunId")]
    assert sorted(r.data.tags["status"] for r in children) == ["completed"] * 3
