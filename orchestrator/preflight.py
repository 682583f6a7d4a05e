"""`orchestrator search --check`: every validation a search does before Ray, then stop.

Reads the data, resolves and pins the space, checks it against this machine and the data, and
prints what would run, without starting Ray: a fast way to try a spec (and what the property
test of the CLI runs).
"""

from __future__ import annotations

import sys
from typing import TextIO

from orchestrator import resources
from orchestrator.prepare import load_data, prepare, print_space
from orchestrator.spec import SearchSpec


def check_spec(spec: SearchSpec, out: TextIO | None = None) -> None:
    """Raise InputError for anything a search would refuse before its trials."""
    out = out or sys.stdout  # looked up now: a test may have replaced it
    data = load_data(spec)
    prepared = prepare(spec, data, *resources.local_resources())
    print(f"ok: search {spec.name!r} ({spec.trials_line()}) on "
          f"{data.describe()}", file=out)
    print_space(prepared, spec, out)
    print(f"  {prepared.plan.max_concurrent_trials} trial(s) at a time here", file=out)
