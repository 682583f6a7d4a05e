"""A local search's Ray listens on loopback only, with token authentication still on.

The search is the `kill_9` story of tests/integration/cli_stories.py: `python -m orchestrator
search` as the README runs it, in its own process so that it starts its own Ray. While it ran,
the listening sockets of that process and of every process under it (GCS, raylet, agents,
dashboard, workers) were listed with psutil, from its start to its `kill -9` in its second trial.
Run: flock /tmp/ray.lock python -m pytest -q tests/integration/test_loopback.py
"""

from __future__ import annotations

import pytest

from tests.integration.cli_stories import is_loopback

pytestmark = pytest.mark.integration


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("::ffff:127.0.0.1")
    assert not any(is_loopback(ip) for ip in ("0.0.0.0", "::", "192.0.2.2", "::ffff:10.0.0.1"))


def test_search_ray_listens_on_loopback_only(cli_stories):
    story = cli_stories["kill_9"].result()
    seen, modes = story.sockets.listening, story.sockets.auth_modes
    names = " ".join(seen.values())
    assert "gcs_server" in names and "raylet" in names, f"Ray's servers not seen: {seen}"
    fixed = {who for (ip, port), who in seen.items() if port == 52365}
    assert not fixed, f"the port every local Ray's agent wants: {fixed}"
    exposed = {f"{ip}:{port}": who for (ip, port), who in seen.items() if not is_loopback(ip)}
    assert not exposed, f"listening beyond loopback: {exposed}"
    # Binding to loopback did not trade away Ray's token authentication.
    assert set(modes) == {"gcs_server", "raylet"}, modes
    assert all(mode == "token" for mode in modes.values()), modes


def test_a_local_ray_serves_its_agent_on_a_port_of_its_own(ray_session):
    """Ray gives every local node's dashboard agent port 52365: a second local Ray (the stories'
    beside this session's) found it taken, spent ~3 s of its 30 s start retrying, and ran with
    no agent HTTP. Ours binds a free port, and serves on it."""
    import socket

    from ray._private import ray_constants

    port = ray_session._private.worker.global_worker.node.dashboard_agent_listen_port
    assert port > 0 and port != ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT, port
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
