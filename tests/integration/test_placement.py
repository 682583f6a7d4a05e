"""`placement` reaches Ray: on a simulated 2-node cluster (head with no CPU + 2 nodes of 2 CPUs),
a 2-worker trial searched with SPREAD lands on two nodes; the default, PACK, would put it on one.

The cluster runs in a subprocess (tests/integration/placement_probe.py, started with the other
probes by tests/integration/probes.py): it cannot share a process with the suite's local Ray.
Run: python -m pytest -q tests/integration/test_placement.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")


def test_spread_puts_a_2_worker_trial_on_two_nodes(probes):
    report = probes["placement"].checked()

    assert report["nodes"] == 3
    assert report["SPREAD"]["status"] == "completed"
    assert report["SPREAD"]["nodes"] == 2
    # The simulated cluster never advertised itself to other Ray users on this machine.
    assert not ADDRESS_FILE.exists() or report["address"] not in ADDRESS_FILE.read_text()
