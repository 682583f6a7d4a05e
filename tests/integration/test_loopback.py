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
    exposed = {f"{ip}:{port}": who for (ip, port), who in seen.items() if not is_loopback(ip)}
    assert not exposed, f"listening beyond loopback: {exposed}"
    # Binding to loopback did not trade away Ray's token authentication.
    assert set(modes) == {"gcs_server", "raylet"}, modes
    assert all(mode == "token" for mode in modes.values()), modes
