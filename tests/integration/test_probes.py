"""The probes' runner (tests/integration/probes.py): a probe whose Ray node did not start in
Ray's fixed 30 s is started once more; any other failure stands."""

from __future__ import annotations

import pytest

from tests.integration import probes

pytestmark = pytest.mark.integration

# Fails as Ray's start-up does the first time (no marker file yet), reports the second.
FLAKY_START = '''
import json
from pathlib import Path
marker = Path(__file__).parent / "started-once"
if not marker.exists():
    marker.write_text("1")
    raise Exception("The current node timed out during startup. This could happen because ...")
print("FAKE " + json.dumps({"started": "again"}))
'''
OTHER_FAILURE = '''
raise AssertionError("what the probe checks did not hold")
'''


def _run(tmp_path, monkeypatch, source: str) -> probes.Probe:
    (tmp_path / "fake_probe.py").write_text(source)
    monkeypatch.setattr(probes, "PROBES", {"fake": ("fake_probe", [], "FAKE ")})
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    return probes.run_all(lambda name: tmp_path / name, env)["fake"]


def test_a_probe_whose_ray_did_not_start_in_time_is_started_once_more(tmp_path, monkeypatch):
    probe = _run(tmp_path, monkeypatch, FLAKY_START)
    assert probe.checked() == {"started": "again"}
    assert "started once more" in probe.output and probes.RAY_DID_NOT_START in probe.output
    assert (tmp_path / "fake" / "again" / "mlflow.db").is_file()


def test_any_other_failure_of_a_probe_stands(tmp_path, monkeypatch):
    probe = _run(tmp_path, monkeypatch, OTHER_FAILURE)
    assert probe.returncode != 0 and probe.report is None
    assert "started once more" not in probe.output
    assert not (tmp_path / "fake" / "again").exists()
