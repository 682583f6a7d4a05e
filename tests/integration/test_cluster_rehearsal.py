"""A cluster shaped like cluster.yaml, on this machine: a head that runs no trials, a worker node
that joined it with `ray start --address`, and a search sent from outside with `ray job submit`.

The head: `ray start --head --num-cpus 0` on 127.0.0.1, token authentication on with a private
token, its own temp dir and free ports (tests/integration/ray_nodes.py). Each worker node: `ray
start --address ... --num-cpus 2` with a temp dir of its own (two nodes sharing one lose the
job's working dir under each other: the driver's cwd vanished mid-run). Checks that every trial
ran on the worker node and its MLflow run says so (node tags, and system metrics sampled there
all through its training), that the records are complete, and that losing the worker node's
raylet mid-trial ends in a recorded outcome rather than a hang; and what `ray job submit` users
meet: a wrong token refused, the job's output tailed, artifacts beside the SQLite store. Every
process it starts is stopped by its own process group or temp dir. Run:
    flock /tmp/ray.lock python -m pytest -q tests/integration/test_cluster_rehearsal.py
"""

from __future__ import annotations

import csv
import json
import os
import queue
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import make_npz, sqlite_store
from tests.integration.ray_nodes import ADDRESS_FILE, BIN, RAY, ROOT, free_ports, ray_cli, \
    stop_node

pytestmark = [pytest.mark.integration, pytest.mark.ray_nodes]  # last: tests/conftest.py

INTERVAL_S = 0.5  # MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL for the trials (short trials)
TINY = {"width": 0.25, "batch_size": 16, "lr": 0.01, "patch_size": 12}
# The GCS declares a node dead after `failure_threshold` missed checks, each `period_ms` apart
# (Ray's defaults: 5 x 3 s). A lost node is found in ~3 s instead of ~15 s; the checks still
# allow 2 s an answer, which a raylet on a busy 2-core machine gives.
HEALTH_CHECKS = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "2000",
                 "RAY_health_check_failure_threshold": "3"}


@dataclass
class Node:
    process: subprocess.Popen
    temp_dir: Path
    node_id: str = ""
    ip: str = ""


# Times the state API is asked before a connection it closed unanswered fails the test.
DROPPED_ASKS = 5


@dataclass
class Cluster:
    url: str
    gcs: str
    env: dict
    head: Node
    workers: list[Node] = field(default_factory=list)

    def nodes(self) -> list[dict]:
        """What `ray list nodes` lists, asked of the state API over HTTP: the CLI is a Python
        process importing Ray per call, and the fixtures poll this every 0.5 s."""
        for attempt in range(DROPPED_ASKS):
            try:
                return self._listed()
            except (ConnectionResetError, urllib.error.URLError) as err:
                # Just after it answered /api/version, a starting dashboard closed the state
                # API's connection unanswered (RemoteDisconnected) in one suite run: asked
                # again, not taken as "no node" (a stopped worker's wait reads that as gone).
                dropped = isinstance(getattr(err, "reason", err), ConnectionResetError)
                if not dropped or attempt == DROPPED_ASKS - 1:
                    raise
                time.sleep(1)

    def _listed(self) -> list[dict]:
        token = Path(self.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        asked = urllib.request.Request(f"{self.url}/api/v0/nodes?limit=100",
                                       headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(asked, timeout=30) as answer:
                return json.load(answer)["data"]["result"]["result"]
        except urllib.error.HTTPError as err:
            if err.code >= 500:  # the state API not up yet: no node listed yet
                return []
            raise

    def add_worker(self, num_cpus: int = 2) -> Node:
        """`ray start --address` a node of `num_cpus` CPUs, with its own temp dir and ports;
        returns once the cluster lists it alive."""
        temp_dir = Path(tempfile.mkdtemp(prefix="raynode-", dir="/tmp"))
        node_mgr, obj_mgr, metrics, agent, agent_grpc, runtime_env = free_ports(6)
        process = subprocess.Popen(
            [RAY, "start", "--block", f"--address={self.gcs}", "--node-ip-address=127.0.0.1",
             f"--num-cpus={num_cpus}", f"--temp-dir={temp_dir}",
             f"--node-manager-port={node_mgr}", f"--object-manager-port={obj_mgr}",
             f"--metrics-export-port={metrics}", f"--dashboard-agent-listen-port={agent}",
             f"--dashboard-agent-grpc-port={agent_grpc}",
             f"--runtime-env-agent-port={runtime_env}", "--disable-usage-stats"],
            env=self.env, stdout=open(temp_dir / "node.out", "w"), stderr=subprocess.STDOUT,
            start_new_session=True)
        node = Node(process, temp_dir)
        self.workers.append(node)
        known = {n.node_id for n in [self.head, *self.workers]}
        deadline = time.monotonic() + 60
        while not node.node_id:
            assert process.poll() is None, (temp_dir / "node.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "the worker node did not join"
            for listed in self.nodes():
                if listed["state"] == "ALIVE" and listed["node_id"] not in known:
                    node.node_id, node.ip = listed["node_id"], listed["node_ip"]
            time.sleep(0.5)
        return node

    def remove_worker(self, node: Node) -> None:
        """Stop a worker node (as `ray stop` on it would) and wait until the cluster lists it
        dead: the next test's trials can only run on the nodes it adds."""
        stop_node(node.process, node.temp_dir)
        deadline = time.monotonic() + 60
        while any(n["node_id"] == node.node_id and n["state"] == "ALIVE" for n in self.nodes()):
            assert time.monotonic() < deadline, "a stopped worker node stays alive"
            time.sleep(0.5)

    def alive_workers(self) -> set[str]:
        return {n["node_id"] for n in self.nodes()
                if n["state"] == "ALIVE" and n["node_id"] != self.head.node_id}

    def kill_raylet(self, node: Node) -> None:
        """SIGKILL the node's raylet, as a lost machine or an OOM kill of it would."""
        for proc in psutil.process_iter(["name", "cmdline"]):
            if proc.info["name"] == "raylet" and \
                    str(node.temp_dir) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
                return
        raise AssertionError(f"no raylet under {node.temp_dir}")


@pytest.fixture(scope="module")
def cluster():
    """A head with no CPUs for trials (cluster.yaml's `CPU: 0`), token auth on; worker nodes
    come from `add_worker`. Everything is stopped, and the temp dirs removed, at the end."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rayhead-", dir="/tmp"))  # short: socket paths
    token_file = temp_dir / "auth_token"
    token_file.write_text(secrets.token_hex(32))
    token_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "PYTHONPATH")}
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **HEALTH_CHECKS}
    gcs, dash, client, agent, agent_grpc, metrics, runtime_env, node_mgr, obj_mgr = free_ports(9)
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         "--dashboard-host=127.0.0.1", "--include-dashboard=true", "--num-cpus=0",
         f"--temp-dir={temp_dir}", f"--port={gcs}", f"--dashboard-port={dash}",
         f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
         f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
         f"--runtime-env-agent-port={runtime_env}", f"--node-manager-port={node_mgr}",
         f"--object-manager-port={obj_mgr}", "--disable-usage-stats"],
        env=env, stdout=open(temp_dir / "head.out", "w"), stderr=subprocess.STDOUT,
        start_new_session=True)
    made = Cluster(f"http://127.0.0.1:{dash}", f"127.0.0.1:{gcs}", env, Node(head, temp_dir))
    try:
        deadline = time.monotonic() + 90
        while True:
            assert head.poll() is None, (temp_dir / "head.out").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{made.url}/api/version", timeout=2)
                break
            except urllib.error.HTTPError:  # up, and refusing us without a token
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray head's dashboard did not come up"
                time.sleep(1)
        while not made.head.node_id:
            assert time.monotonic() < deadline, "the Ray head did not list itself"
            for listed in made.nodes():
                made.head.node_id = listed["node_id"]
            time.sleep(0.5)
        yield made
    finally:
        for node in [*made.workers, made.head]:  # workers first: the head outlives them
            stop_node(node.process, node.temp_dir)
        after = ADDRESS_FILE.read_text() if ADDRESS_FILE.exists() else None
        assert after is None or f":{gcs}" not in after
        for node in [*made.workers, made.head]:
            shutil.rmtree(node.temp_dir, ignore_errors=True)


def _submit(cluster: Cluster, tmp_path: Path, name: str, spec: str, *args: str,
            data_n: int = 240) -> subprocess.Popen:
    """`ray job submit` a search of `spec` (YAML text) from outside the cluster, the project as
    the job's working dir; its output (the job's own, tailed by the CLI) comes in lines."""
    (tmp_path / "spec.yaml").write_text(spec)
    data = make_npz(tmp_path / "tiny.npz", n=data_n)
    sqlite_store(tmp_path)  # the job's store, its tables made (~1-3 s of the worker's CPU)
    env_vars = {"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": str(INTERVAL_S),
                "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}
    return subprocess.Popen(
        [RAY, "job", "submit", "--address", cluster.url,
         "--submission-id", f"{name}-{secrets.token_hex(4)}", "--working-dir", ".",
         "--runtime-env-json", json.dumps({"env_vars": env_vars}), "--",
         "python", "-m", "orchestrator", "search", "--spec", str(tmp_path / "spec.yaml"),
         "--name", name, "--data", data, "--baseline", "none", "--profile", "off",
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
         "--output-dir", str(tmp_path / "runs"), *args],
        env=cluster.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _lines(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait(process: subprocess.Popen, lines: queue.Queue, timeout_s: float,
          until: str | None = None) -> str:
    """The output until a line holding `until` (None: until the CLI exits), bounded: a hang
    fails the test, it does not stall the suite."""
    out, deadline = [], time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            process.kill()
            raise AssertionError(f"no {until or 'end'} within {timeout_s:.0f} s:\n"
                                 + "".join(out)[-6000:])
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line is None:
            process.wait(timeout=30)
            return "".join(out)
        out.append(line)
        if until is not None and until in line:
            return "".join(out)


def _trial_runs(uri: str, name: str):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    trial_ids = [r.data.tags["orchestrator.trial_id"] for r in children]
    assert len(trial_ids) == len(set(trial_ids)), "a trial has two runs"
    return client, children


def _series_covers_training(client: MlflowClient, run, key: str) -> None:
    """`key`'s samples began before the trial's training and went on, every ~INTERVAL_S, to its
    last report (epoch metrics carry the time the driver received each report)."""
    points = sorted(m.timestamp for m in client.get_metric_history(run.info.run_id, key))
    epochs = client.get_metric_history(run.info.run_id, "train_time_s")
    last_report = max(m.timestamp for m in epochs)
    trained_ms = run.data.metrics["final_train_time_s"] * 1000
    assert points and points[0] <= last_report - trained_ms, (key, points, last_report)
    assert points[-1] >= last_report - 5000, (key, points[-1], last_report)
    gaps = [b - a for a, b in zip(points, points[1:])]
    assert max(gaps) < 4 * INTERVAL_S * 1000, (key, gaps)
    assert len(points) >= trained_ms / 1000 / INTERVAL_S / 2


@pytest.fixture(scope="module")
def worker(cluster):
    """One worker node of 2 CPUs, the only one with CPUs: the first test's trials run there, and
    the second test loses it (so that one runs last). Every node added is removed after."""
    node = cluster.add_worker(num_cpus=2)
    assert cluster.alive_workers() == {node.node_id}
    yield node
    for added in cluster.workers:
        if added.process.poll() is None:
            cluster.remove_worker(added)


def test_the_job_server_refuses_a_wrong_token(cluster):
    env = {**cluster.env, "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env.pop("RAY_AUTH_TOKEN_PATH")
    listed = ray_cli(["job", "list", "--address", cluster.url], env)
    assert listed.returncode != 0
    assert "401" in listed.stdout + listed.stderr or "uthenticat" in listed.stdout + listed.stderr


# The submitted search's trials, in this order (warm start): one trains in its Tune trial process,
# then one as a 2-worker Ray Train group. (Two groups back to back once raced through a reused
# trial actor; a search with a worker-group trial reuses no actor since, `reuse_actors`, so a
# third trial here would check nothing more for its ~15 s.)
TRIALS = [{"workers": 1, "lr": 0.01}, {"workers": 2, "lr": 0.005}]


def test_every_trial_runs_on_the_worker_node_and_its_records_come_from_there(cluster, worker,
                                                                           tmp_path):
    spec = ("space: {workers: [1, 2], lr: [0.005, 0.01, 0.02]}\n"
            f"base: {json.dumps({k: v for k, v in TINY.items() if k != 'lr'})}\n"
            f"warm_start: {json.dumps(TRIALS)}\n")
    began = time.monotonic()
    job = _submit(cluster, tmp_path, "it-rehearsal", spec, "--trials", str(len(TRIALS)),
                  "--epochs", "2", "--placement", "PACK")
    output = _wait(job, _lines(job), timeout_s=300)
    print(f"rehearsal search: {time.monotonic() - began:.1f} s")
    assert job.returncode == 0, output[-6000:]  # the CLI exits 1 when the job FAILED
    assert "succeeded" in output.lower(), output[-6000:]
    assert "Leaderboard" in output  # the job's own output, tailed by the CLI
    assert f"{len(TRIALS)} trials: {len(TRIALS)} completed" in output, output[-6000:]
    board = list(csv.DictReader((tmp_path / "runs" / "it-rehearsal" / "leaderboard.csv").open()))
    assert sorted((int(r["workers"]), float(r["lr"])) for r in board) == \
        sorted((t["workers"], t["lr"]) for t in TRIALS)

    client, children = _trial_runs(f"sqlite:///{tmp_path / 'mlflow.db'}", "it-rehearsal")
    assert len(children) == len(TRIALS)
    # Artifacts live beside the SQLite store, not in the job's working dir (Ray deletes it).
    parent = client.get_run(children[0].data.tags["mlflow.parentRunId"])
    assert {"leaderboard.csv", "spec.yaml"} <= \
        {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert parent.info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())
    for run in children:
        tags = run.data.tags
        assert tags["status"] == "completed" and run.info.status == "FINISHED"
        # Where it ran: the worker node, never the head (it has no CPU for trials).
        assert tags["node.id"] == worker.node_id != cluster.head.node_id, tags
        assert tags["node.ip"] == worker.ip
        assert tags["env.device"].startswith("cpu") and tags["env.gpu_count"] == "0"
        assert tags["env.torch"] and tags["env.ray"] and tags["env.git_sha"]
        # Sampled there, all through its training, at the job's interval.
        _series_covers_training(client, run, "system/cpu_utilization_percentage")
        assert "system/system_memory_usage_megabytes" in run.data.metrics
        assert not any(k.startswith("system") and "gpu" in k for k in run.data.metrics)
    (group,) = [run for run in children if run.data.params["workers"] == "2"]
    assert group.data.tags["node.rank1.id"] == worker.node_id
    _series_covers_training(client, group, "system/rank1/cpu_utilization_percentage")
    (alone,) = [run for run in children if run.data.params["workers"] == "1"]
    assert "node.rank1.id" not in alone.data.tags


def test_losing_the_worker_nodes_raylet_mid_trial_ends_in_a_recorded_outcome(cluster, worker,
                                                                             tmp_path):
    lost = worker  # the only node with CPUs: the trial runs there
    # A slow model (~0.04 s a step, 60 steps an epoch, ~3 s): the kill lands in epoch 2 of 3,
    # before the trial could end.
    slow = {**TINY, "workload": "tests.integration.faults:slow_classifier"}
    spec = f"space: {{}}\nbase: {json.dumps(slow)}\n"
    began = time.monotonic()
    job = _submit(cluster, tmp_path, "it-node-lost", spec, "--trials", "1", "--epochs", "3",
                  data_n=960)
    lines = _lines(job)
    before = _wait(job, lines, timeout_s=240, until="epoch 1/3")
    cluster.kill_raylet(lost)
    # What cluster.yaml's autoscaler does for `min_workers: 1`: a new node takes its place.
    replacement = cluster.add_worker(num_cpus=2)
    output = before + _wait(job, lines, timeout_s=300)
    print(f"node-loss search: {time.monotonic() - began:.1f} s")
    assert job.returncode == 0, output[-6000:]

    client, (run,) = _trial_runs(f"sqlite:///{tmp_path / 'mlflow.db'}", "it-node-lost")
    tags = run.data.tags
    assert tags["status"] == "completed" and run.info.status == "FINISHED", tags
    assert "1 trial: 1 completed" in output, output[-6000:]
    # It resumed from its epoch-1 checkpoint on the new node, and its run says where.
    assert tags["restarted"] == "true" and run.data.metrics["final_restarts"] >= 1
    assert tags["node.id"] == replacement.node_id != lost.node_id
