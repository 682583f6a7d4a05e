"""Probes on Ray schedulers of their own, run at once: a probe is a subprocess (a simulated cluster,
or a local Ray of another size, cannot share a process with the suite's local Ray) that prints
one line `PREFIX {json}` of what it found.

* `placement` (tests/integration/placement_probe.py): SPREAD on a simulated 2-node cluster;
* `gpu` and `cpu` (tests/integration/resources_probe.py): resources that fit a 1-GPU node, and
  a Ray with fewer CPUs than the machine's cores.

Each mostly waits on its Ray (nodes starting, trials scheduled), so `run_all` starts them
together; the suite starts them with its first integration test (tests/conftest.py), beside
the tests that use the session's Ray.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import sqlite_store

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300
# name -> (module, its arguments before OUT_DIR, the prefix of its report line)
PROBES: dict[str, tuple[str, list[str], str]] = {
    "placement": ("tests.integration.placement_probe", [], "PLACEMENT "),
    "gpu": ("tests.integration.resources_probe", ["gpu"], "RESOURCES "),
    "cpu": ("tests.integration.resources_probe", ["cpu"], "RESOURCES "),
}


@dataclass
class Probe:
    returncode: int | None
    output: str
    seconds: float
    """From the start of all probes to this one's end."""
    report: dict | None
    """The JSON of its last report line; None if it printed none."""

    def checked(self) -> dict:
        assert self.returncode == 0 and self.report is not None, self.output[-5000:]
        return self.report


def _finish(name: str, proc: subprocess.Popen, began: float) -> Probe:
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        output += f"\n(the probe did not end within {TIMEOUT_S} s)"
    prefix = PROBES[name][2]
    lines = [ln for ln in output.splitlines() if ln.startswith(prefix)]
    return Probe(proc.returncode, output, time.monotonic() - began,
                 json.loads(lines[-1].removeprefix(prefix)) if lines else None)


def run_all(tmp_dir: Callable[[str], Path], env: dict[str, str] | None = None
            ) -> dict[str, Probe]:
    """Every probe at once, each in `tmp_dir(name)`, its process started from `env` (default:
    this process's environment)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("RAY_ADDRESS", None)
    started, began = {}, time.monotonic()
    for name, (module, args, _) in PROBES.items():
        out = tmp_dir(name)
        sqlite_store(out)  # out/mlflow.db, its tables made: the probes are not about MLflow
        started[name] = subprocess.Popen(
            [sys.executable, "-m", module, *args, str(out)], cwd=out, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)  # its own process group: on a timeout, stop all it started
    # One reader each: a probe whose output nobody reads would block on a full pipe.
    with ThreadPoolExecutor(len(started)) as pool:
        futures = {name: pool.submit(_finish, name, proc, began) for name, proc in started.items()}
    return {name: future.result() for name, future in futures.items()}
