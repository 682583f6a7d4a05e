"""Probes on Ray schedulers of their own, run one after another: a probe is a subprocess (a
simulated cluster, or a local Ray of another size, cannot share a process with the suite's local
Ray) that prints one line `PREFIX {json}` of what it found.

* `placement` (tests/integration/placement_probe.py): SPREAD on a simulated 2-node cluster;
* `gpu` and `cpu` (tests/integration/resources_probe.py): resources that fit a 1-GPU node, and
  a Ray with fewer CPUs than the machine's cores.

The suite starts them with its first integration test (tests/conftest.py), beside the tests that
use the session's Ray: each mostly waits on its Ray (nodes starting, trials scheduled). Not all
at once: Ray gives a starting node 30 s to register its raylet (ray/_private/node.py, not
configurable), and with the three started together beside the session's Ray and the two CLI
stories' (six raylets starting in a minute on 2 cores), the `gpu` probe's head and the `cpu`
probe's Ray both missed it in a fresh-clone suite run that ran at 0.6x its usual pace (AMD EPYC,
2026-12-03). One at a time, `placement` (read first, by test_placement) still ends as soon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
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
    """Every probe, one after another in the order of `PROBES`, each in `tmp_dir(name)`, its
    process started from `env` (default: this process's environment)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("RAY_ADDRESS", None)
    done, began = {}, time.monotonic()
    for name in PROBES:
        out = tmp_dir(name)
        probe = _start_and_finish(name, out, env, began)
        if _ray_did_not_start(probe):
            again = _start_and_finish(name, out / "again", env, began)
            probe = Probe(again.returncode, f"{probe.output}\n({name}: Ray's node did not "
                          f"start in time: started once more)\n{again.output}", again.seconds,
                          again.report)
        done[name] = probe
    return done


# Ray's own start-up failing, not what a probe checks: a starting node gets 30 s to register
# its raylet (ray/_private/node.py, not configurable). In a fresh-clone suite run on 2 cores
# (AMD EPYC, 2026-12-07 16:09) the placement probe's head node missed it beside the session's
# Ray and the first integration tests; staggering the probes (above) made it rarer, not gone.
# Such a probe is started once more, its first process group stopped; any other failure stands.
RAY_DID_NOT_START = "The current node timed out during startup"


def _ray_did_not_start(probe: Probe) -> bool:
    return probe.returncode != 0 and RAY_DID_NOT_START in probe.output


def _start_and_finish(name: str, out: Path, env: dict[str, str], began: float) -> Probe:
    module, args, _ = PROBES[name]
    out.mkdir(parents=True, exist_ok=True)
    sqlite_store(out)  # out/mlflow.db, its tables made: the probes are not about MLflow
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args, str(out)], cwd=out, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)  # its own process group: on a timeout, stop all it started
    probe = _finish(name, proc, began)
    if _ray_did_not_start(probe):
        try:  # what the failed start left running (its GCS, raylets) goes with its group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return probe
