"""Fixtures of the integration tests that several modules read."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from tests.integration.cli_stories import play_all
from tests.integration.probes import Probe, run_all


@pytest.fixture(scope="session")
def cli_stories(tmp_path_factory) -> dict[str, Future]:
    """The CLI searches stopped anywhere and resumed (tests/integration/cli_stories.py), played
    at once the first time a test asks."""
    return play_all(tmp_path_factory.mktemp)


@pytest.fixture(scope="session")
def probes(tmp_path_factory) -> dict[str, Probe]:
    """The probes on Ray schedulers of their own (tests/integration/probes.py), run at once the
    first time a test asks."""
    probes = run_all(tmp_path_factory.mktemp)
    print("probes: " + ", ".join(f"{name} {p.seconds:.0f} s" for name, p in probes.items()))
    return probes
