"""Fixtures of the integration tests that several modules read."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from tests.conftest import background
from tests.integration.probes import Probe


@pytest.fixture(scope="session")
def cli_stories(tmp_path_factory) -> dict[str, Future]:
    """The CLI searches stopped anywhere and resumed (tests/integration/cli_stories.py),
    started with the first integration test (or now) and played in the background."""
    return background(tmp_path_factory)["cli_stories"]


@pytest.fixture(scope="session")
def probes(tmp_path_factory) -> dict[str, Probe]:
    """The probes on Ray schedulers of their own (tests/integration/probes.py), started with
    the first integration test (or now); waited for here."""
    probes = background(tmp_path_factory)["probes"].result()
    print("probes: " + ", ".join(f"{name} {p.seconds:.0f} s" for name, p in probes.items()))
    return probes
