"""A command's wall time starts when its process began running our code, not when the process
was created: a shell that ends `pip install ... && orchestrator search` under `bash -c` (a CI
step, a Ray job's entrypoint) execs that last command in its own, older process."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # runs a Python that imports the orchestrator


def test_time_spent_before_exec_is_not_the_commands():
    code = ("import time, psutil; from orchestrator import cli; "
            "print(time.time() - cli.IMPORTED_AT, time.time() - psutil.Process().create_time())")
    out = subprocess.run(["bash", "-c", f"sleep 2; exec {sys.executable} -c '{code}'"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    ours, created = map(float, out.split())
    assert created >= 2.0  # the shell's sleep, in the process's age
    assert ours < created - 1.5  # not in the command's
