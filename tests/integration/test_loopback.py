"""A local search's Ray listens on loopback only, with token authentication still on.

Runs a tiny real search as the README does (`python -m orchestrator search`, in its own process
so that it starts its own Ray), and while it runs lists the listening sockets of that process and
of every process under it (GCS, raylet, agents, dashboard, workers) with psutil. Run:
    flock /tmp/ray.lock python -m pytest -q tests/integration/test_loopback.py
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from tests.conftest import make_npz, sqlite_store

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is IPv4 loopback
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("::ffff:127.0.0.1")
    assert not any(is_loopback(ip) for ip in ("0.0.0.0", "::", "192.0.2.2", "::ffff:10.0.0.1"))


def _tree(root: psutil.Process) -> list[psutil.Process]:
    """`root` and every process under it (none once it has exited)."""
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _listening(root: psutil.Process) -> dict[tuple[str, int], str]:
    """(ip, port) -> process name, of every socket listening in `root` and its descendants."""
    found = {}
    for proc in _tree(root):
        try:
            name = proc.name()
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found[(conn.laddr.ip, conn.laddr.port)] = f"{name} (pid {proc.pid})"
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _auth_modes(root: psutil.Process) -> dict[str, str | None]:
    """Process name -> RAY_AUTH_MODE in its environment, for Ray's GCS and raylet under `root`
    (a local `ray.init` turns token authentication on by setting it, and every Ray process
    reads its mode from there)."""
    modes = {}
    for proc in _tree(root):
        try:
            name = proc.name()
            if name in ("gcs_server", "raylet"):
                modes[name] = proc.environ().get("RAY_AUTH_MODE")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return modes


def test_search_ray_listens_on_loopback_only(tmp_path):
    spec = {"name": "loopback", "baseline": "none",
            "data": make_npz(tmp_path / "tiny.npz"), "num_trials": 1,
            "epochs": 1, "space": {"width": [0.25]}, "output_dir": str(tmp_path / "runs"),
            "tracking_uri": sqlite_store(tmp_path), "profile": "off",
            "base": {"batch_size": 16, "lr": 0.01, "patch_size": 12, "workers": 1}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    # Start a local Ray, with Ray's own default for its authentication (no mode set).
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    env["ORCHESTRATOR_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "search", "--spec", str(tmp_path / "spec.yaml")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(proc.pid)
    seen: dict[tuple[str, int], str] = {}
    modes: dict[str, str | None] = {}
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline:
        seen |= _listening(root)  # Ray's processes come and go: sample all along the search
        modes |= _auth_modes(root)
        time.sleep(0.3)
    if proc.poll() is None:
        proc.kill()
    output = proc.communicate()[0]
    assert proc.returncode == 0, output[-3000:]
    names = " ".join(seen.values())
    assert "gcs_server" in names and "raylet" in names, f"Ray's servers not seen: {seen}"
    exposed = {f"{ip}:{port}": who for (ip, port), who in seen.items() if not is_loopback(ip)}
    assert not exposed, f"listening beyond loopback: {exposed}"
    # Binding to loopback did not trade away Ray's token authentication.
    assert set(modes) == {"gcs_server", "raylet"}, modes
    assert all(mode == "token" for mode in modes.values()), modes
