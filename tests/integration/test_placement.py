"""`placement` decides where a trial's workers go: on a simulated 2-node cluster (head with no
CPU + 2 nodes of 2 CPUs), a 2-worker trial lands on one node with PACK and on two with SPREAD.

The cluster runs in a subprocess (tests/integration/placement_probe.py): it cannot share a process
with the suite's local Ray. Run: python -m pytest -q tests/integration/test_placement.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")


def test_pack_uses_one_node_and_spread_uses_two(tmp_path):
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.placement_probe", str(tmp_path)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: on a timeout, stop it and all it started
    )
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = [ln for ln in output.splitlines() if ln.startswith("PLACEMENT ")]
    assert proc.returncode == 0 and lines, output[-5000:]
    report = json.loads(lines[-1].removeprefix("PLACEMENT "))

    assert report["nodes"] == 3
    assert report["PACK"]["status"] == "completed"
    assert report["SPREAD"]["status"] == "completed"
    assert report["SPREAD"]["nodes"] == 2
    # The simulated cluster never advertised itself to other Ray users on this machine.
    assert not ADDRESS_FILE.exists() or report["address"] not in ADDRESS_FILE.read_text()
    if report["PACK"]["nodes"] != 1:
        # Ray's PACK is best effort (STRICT_PACK is the guarantee): in a long test session it
        # has spread a 2-worker trial over both nodes even from an idle cluster. Known, open.
        pytest.xfail(f"PACK placed the trial on {report['PACK']['nodes']} nodes")
