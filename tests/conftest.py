"""Shared fixtures: one Ray instance per test session, tiny data, a scratch working directory,
fresh MLflow stores; and the rule that keeps the fast tier fast.

    python -m pytest -q                        # everything (unit tests first, then integration)
    python -m pytest -q -m "not integration"   # the fast tier: no Ray, no MLflow server

A test that starts Ray (`ray.init`, `init_ray`, the `ray_session` fixture, a simulated
`ray.cluster_utils.Cluster`, a subprocess running `ray`, `python -m orchestrator` or a probe) or an
`mlflow server` (the `mlflow_server` fixture) must be marked `integration`: unmarked, it fails
with a message saying so (`_refuse_ray_and_servers` below), in both runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

INTEGRATION = "integration"
# Fixtures that start Ray or a server: only integration tests may ask for them.
SERVER_FIXTURES = ("ray_session", "mlflow_server")
MARK_IT = ("mark it `@pytest.mark.integration` (or `pytestmark = pytest.mark.integration` in "
           "its module): the fast tier (-m 'not integration') runs without Ray and servers")


def _is_integration(item: pytest.Item) -> bool:
    return item.get_closest_marker(INTEGRATION) is not None


# Integration tests that start Ray nodes of their own with `ray start` (the cluster rehearsal)
# run after all others, when the background stories and probes have long ended. Ray gives a
# starting node 30 s to register its raylet (ray/_private/node.py, not configurable). Run second
# among the integration tests, beside the stories and probes (five Rays starting and training on
# 2 cores), the rehearsal's head took 30-40 s to come up where it takes 7.5 s alone, and in one
# suite run its worker node missed those 30 s and the module errored (AMD EPYC, 2026-12-02).
OWN_NODES = "ray_nodes"


def _order(item: pytest.Item) -> tuple[bool, bool]:
    return _is_integration(item), item.get_closest_marker(OWN_NODES) is not None


def pytest_collection_modifyitems(config, items):
    """Unit tests first, integration tests after (each group in file order), and those that
    start Ray nodes of their own last (`OWN_NODES`): failures of the fast tier show first, and no
    unit test ever runs while the session's Ray is up (so one that would lean on it fails here as
    it does in the fast tier). Modules stay together."""
    items[:] = sorted(items, key=_order)


# The stories and probes that run their own Rays in subprocesses (tests/integration/
# cli_stories.py, probes.py), started once, in the background, with the first integration test.
# Not with the fast tier: tried, started with the session's first test, the suite took 25.5 min
# where it had taken 17 (AMD EPYC, 2 cores, ~14% slower by then): the fast tier's torch threads
# and theirs shared 2 cores, and both ran slower than apart.
_BACKGROUND: dict = {}
_BACKGROUND_FIXTURES = ("cli_stories", "probes")
# The probes start this long after the stories. Ray gives a node 30 s to register its raylet
# (ray/_private/node.py, not configurable): five local Rays starting at once beside the
# session's (two stories, three probes, one a 2-node cluster) took longer on a 2-core VM that
# ran at 0.6x its usual speed, and both stories failed to start. Apart, and the probes one
# after another (tests/integration/probes.py), no two probes start their Rays together; their
# results are read late in the run (test_placement, test_resources_fit).
_PROBES_AFTER_S = 30.0


def background(tmp_path_factory) -> dict:
    """{'cli_stories': {name: Future[Story]}, 'probes': Future[{name: Probe}]}, started now if
    not yet, from the environment as it is now (a test may set variables while they run).
    Never while a unit test runs: the fast tier refuses their subprocesses."""
    if not _BACKGROUND:
        from concurrent.futures import ThreadPoolExecutor

        from tests.integration.cli_stories import play_all
        from tests.integration.probes import PROBES, run_all

        env = dict(os.environ)
        _BACKGROUND["cli_stories"] = play_all(tmp_path_factory.mktemp, env)
        folders = {name: tmp_path_factory.mktemp(name) for name in PROBES}
        pool = ThreadPoolExecutor(1)
        _BACKGROUND["probes"] = pool.submit(
            lambda: (time.sleep(_PROBES_AFTER_S), run_all(folders.__getitem__, env))[1])
        pool.shutdown(wait=False)
    return _BACKGROUND


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before any fixture is set up: an unmarked test may not ask for Ray or a server. The
    first integration test starts the background stories and probes, where the run has tests
    that read them (they take ~100 s of mostly waiting: beside the rest, not before it)."""
    session = getattr(item, "session", None)
    if _is_integration(item) and session is not None and not _BACKGROUND and any(
            f in other.fixturenames for other in session.items for f in _BACKGROUND_FIXTURES):
        background(item.config._tmp_path_factory)
    if not _is_integration(item):
        asked = [f for f in SERVER_FIXTURES if f in item.fixturenames]
        if asked:
            pytest.fail(f"{item.nodeid} uses the {', '.join(asked)} fixture but is not marked "
                        f"integration; {MARK_IT}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of an unmarked test run with Ray's and MLflow's starters
    refused."""
    if _is_integration(item):
        return (yield)
    with _refuse_ray_and_servers(item.nodeid):
        return (yield)


# What a subprocess may not run in an unmarked test: Ray's and MLflow's CLIs, the orchestrator
# (its CLI starts Ray), and Python running a script, a module of these packages or code that
# names them (a probe that starts a simulated cluster, a search).
_SERVER_PROGRAMS = {"ray", "mlflow", "orchestrator", "serve", "tune"}
_SERVER_PACKAGES = {"ray", "mlflow", "orchestrator", "tests", "examples"}
_SERVER_WORDS = ("ray.init", "cluster_utils", "orchestrator", "mlflow", "ray start")


def _starts_ray_or_a_server(args) -> bool:
    argv = [str(a) for a in ([args] if isinstance(args, (str, bytes, os.PathLike)) else args)]
    if len(argv) == 1 and " " in argv[0]:  # a shell command line
        argv = argv[0].split()
    if not argv:
        return False
    program = Path(argv[0]).name
    if program in _SERVER_PROGRAMS:
        return True
    if program in ("sh", "bash") and "-c" in argv:
        return any(w in " ".join(argv) for w in (*_SERVER_WORDS, "python"))
    if not (program.startswith("python") or argv[0] == sys.executable):
        return False
    rest = argv[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        rest = rest[1:]  # interpreter options (-u, -X importtime, ...)
    if not rest:
        return False
    if rest[0] == "-m":
        return len(rest) > 1 and rest[1].split(".")[0] in _SERVER_PACKAGES
    if rest[0] == "-c":
        return len(rest) > 1 and any(w in rest[1] for w in _SERVER_WORDS)
    return True  # a script


@contextlib.contextmanager
def _refuse_ray_and_servers(nodeid: str):
    import ray
    import ray._private.worker
    import ray.cluster_utils

    import orchestrator.resources
    from tests.mlflow_server import MlflowServer

    def refuse(what: str):
        def refused(*args, **kwargs):
            pytest.fail(f"{nodeid} {what} but is not marked integration; {MARK_IT}",
                        pytrace=False)
        return refused

    real_popen_init = subprocess.Popen.__init__

    def popen_init(self, args, *rest, **kwargs):
        if _starts_ray_or_a_server(args):
            refuse(f"runs `{args if isinstance(args, str) else ' '.join(map(str, args))}`")()
        real_popen_init(self, args, *rest, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray, "init", refuse("starts Ray (ray.init)"))
        mp.setattr(ray._private.worker, "init", refuse("starts Ray (ray.init)"))
        mp.setattr(orchestrator.resources, "init_ray", refuse("starts or joins Ray (init_ray)"))
        mp.setattr(ray.cluster_utils.Cluster, "__init__",
                   refuse("starts a simulated Ray cluster (ray.cluster_utils.Cluster)"))
        mp.setattr(MlflowServer, "start", refuse("starts an `mlflow server`"))
        mp.setattr(subprocess.Popen, "__init__", popen_init)
        yield


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for every integration test (starting Ray costs ~5 s)."""
    import ray

    from orchestrator.resources import RAY_ENV, init_ray

    os.environ.update(RAY_ENV)
    if not ray.is_initialized():
        init_ray()
    yield ray
    ray.shutdown()


def make_npz(path, *, n=240, n_val=80, size=16, classes=3, seed=0, channels=None) -> str:
    """A tiny learnable image set: class k is a bright square in quadrant k, under noise."""
    rng = np.random.default_rng(seed)

    def images(count):
        y = rng.integers(0, classes, count)
        x = rng.normal(0, 0.3, (count, 1, size, size)).astype(np.float32)
        half = size // 2
        for i, k in enumerate(y):
            r, c = (k // 2) * half, (k % 2) * half
            x[i, 0, r + 2 : r + half - 2, c + 2 : c + half - 2] += 1.5
        return (x if channels else x[:, 0]), y

    x, y = images(n)
    x_val, y_val = images(n_val)
    np.savez(path, x=x, y=y, x_val=x_val, y_val=y_val)
    return str(path)


_EMPTY_STORE: list[Path] = []  # the empty MLflow store of this test process, made on first use
_EMPTY_STORE_LOCK = threading.Lock()  # the background's threads make stores too


def sqlite_store(directory) -> str:
    """The URI of a fresh MLflow store, `directory/mlflow.db`: a copy of one empty store made
    once per test process. Creating MLflow's tables costs ~1 s a store (~3 s the first time in a
    process), which tiny searches would otherwise pay each; the copy is the same empty store."""
    with _EMPTY_STORE_LOCK:
        if not _EMPTY_STORE:
            import atexit

            from mlflow.tracking import MlflowClient

            empty = Path(tempfile.mkdtemp(prefix="mlflow-empty-")) / "mlflow.db"
            MlflowClient(f"sqlite:///{empty}").search_experiments()  # creates the tables
            atexit.register(shutil.rmtree, empty.parent, ignore_errors=True)
            _EMPTY_STORE.append(empty)
    path = Path(directory) / "mlflow.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_EMPTY_STORE[0], path)
    return f"sqlite:///{path}"


@pytest.fixture
def tiny_npz(tmp_path):
    return make_npz(tmp_path / "tiny.npz")


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in a scratch directory: mlflow.db and orchestrator_runs/ land there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORCHESTRATOR_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """One real `mlflow server` on 127.0.0.1 for the session (it takes ~10 s to come up). Tests
    may stop and restart it (an outage); each leaves it running and uses its own experiment."""
    from tests.mlflow_server import MlflowServer, mlflow_cli_missing

    if mlflow_cli_missing():
        pytest.skip("the mlflow CLI is not installed")
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    yield server
    server.stop(kill=True)
