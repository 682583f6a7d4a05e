"""Shared fixtures: one Ray instance per test session, tiny data, a scratch working directory.

Run everything with `python -m pytest -q`; unit tests need no Ray, integration tests share one.
"""

from __future__ import annotations

import os

import numpy as np
import pytest


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
    server.stop()
