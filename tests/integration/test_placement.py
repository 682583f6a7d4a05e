"""`placement` decides where a trial's workers go: on a simulated 2-node cluster (head with no
CPU + 2 nodes of 2 CPUs), a 2-worker trial lands on one node with PACK and on two with SPREAD.

The cluster runs in a subprocess (tests/integration/placement_probe.py, started with the other
probes by tests/integration/probes.py): it cannot share a process with the suite's local Ray.
Run: python -m pytest -q tests/integration/test_placement.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")


def test_pack_uses_one_node_and_spread_uses_two(probes):
    report = probes["placement"].checked()

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
