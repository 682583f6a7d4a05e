"""The Ray token a search relies on is private (0600): made private where Ray would make it
world-readable, tightened where it already is. HOME points at a temporary folder: the real
`~/.ray` is never touched. No Ray is started. Run:
    python -m pytest -q tests/orchestrator/test_ray_token.py
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from orchestrator.ray_token import private_token, token_path


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_token_is_made_private_where_ray_reads_it(home):
    old = os.umask(0o022)  # the umask that left Ray's own token 0644
    try:
        path = private_token()
    finally:
        os.umask(old)
    assert path == home / ".ray" / "auth_token"
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0  # Ray's own format: 32 random bytes, hex
    # Ray's loader (the C++ one every Ray process uses) finds this very file, in a process of
    # its own so that this one's token cache stays as it was.
    found = subprocess.run(
        [sys.executable, "-c", "from ray._raylet import AuthenticationTokenLoader as L; "
         "print(L.instance().get_raw_token())"],
        env={**os.environ, "RAY_AUTH_MODE": "token"}, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == token, found.stderr[-2000:]
    assert private_token() == path and path.read_text() == token  # never replaced


def test_a_readable_token_is_tightened_and_kept(home):
    path = home / ".ray" / "auth_token"
    path.parent.mkdir()
    path.write_text("a" * 64)
    path.chmod(0o644)
    private_token(create=False)
    assert _mode(path) == 0o600 and path.read_text() == "a" * 64


def test_a_named_token_file_is_tightened_and_never_created(home, monkeypatch):
    named = home / "my-token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    assert private_token() == named and not named.exists()  # Ray reports a missing one itself
    assert not (home / ".ray").exists()
    named.write_text("b" * 64)
    named.chmod(0o640)
    private_token()
    assert _mode(named) == 0o600


def test_no_file_when_the_token_is_in_the_environment_or_auth_is_off(home, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "c" * 64)
    assert token_path() is None and private_token() is None
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert private_token() is None
    assert not (home / ".ray").exists()
