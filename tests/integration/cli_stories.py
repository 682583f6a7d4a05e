"""Real CLI searches stopped anywhere and resumed with the command they printed (issue 20), played
at once: `tests/integration/test_stop_anywhere.py` asserts that each search ended whole, and
`tests/integration/test_loopback.py` what one of them listened on while it ran.

Two stories, each a driver of its own (its own folder, MLflow store and local Ray, as the
README's first command starts one):

* `ctrl_c`: Ctrl-C (SIGINT to the process group, as a terminal sends it) at epoch 2 of the
  baseline; then its resume is stopped too, by SIGTERM while the results are being written (the
  resumed driver signals itself from the finish stage), and resumed again. A stop in the finish
  stage after a whole search of its own would train the same baseline and trials a third time
  for nothing (~15 s of the suite): what it checks is the finish stage's stop and resume;
* `kill_9`: `kill -9` of the driver's process group (the driver and the Ray it started) while its
  second trial trains; the sockets its Ray's processes listen on are sampled all along.

The stories mostly wait on Ray, so `play_all` plays them in one thread each: together they take
about the time of the longest, not their sum. A stop is sent from the thread that reads the
driver's output the moment the line it waits for arrives, so a busy machine does not move where
it lands.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[2]
NAME, TRIALS, EPOCHS = "stopped", 2, 3
# A driver that stops in its finish stage: the CLI, whose finish stage sends the driver SIGTERM
# once the leaderboard is written (as a user's `kill PID` would land there).
SIGNAL_IN_FINISH = """
import os, signal, sys
import orchestrator.finish as finish
real = finish.pareto_png
def pareto_png(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)
finish.pareto_png = pareto_png
from orchestrator.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Driver:
    """A CLI process in its own session whose output lines are collected as they come. `when`
    (parts, action): `action(driver)` runs once, from the reading thread, on the first line
    that holds every part."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str], code: str | None = None,
                 when: tuple[tuple[str, ...], Callable[[Driver], None]] | None = None):
        env = {**env, "PYTHONPATH": str(REPO), "ORCHESTRATOR_CACHE": str(cwd / "cache")}
        # A local Ray of its own, with Ray's own default for its authentication (no mode set).
        for inherited in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
            env.pop(inherited, None)
        # The stories' three drivers train on 2 cores at once, each trial with 2 torch threads:
        # OpenMP threads that wait then sleep instead of spinning through the slice another
        # driver needs. Measured on their own, alternated 3 times each: 70-76 s with it, 83-95 s
        # without; inside the suite 83 s (83-92 s before). Not for the whole suite: there a
        # trial mostly runs alone, and the suite took 661 s with it against 636 s.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        head = ["-c", code] if code else ["-m", "orchestrator"]
        self.lines: list[str] = []
        self._when = when
        self.proc = subprocess.Popen([sys.executable, *head, *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if self._when and all(p in line for p in self._when[0]):
                action, self._when = self._when[1], None
                action(self)

    def signal_group(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float = 300) -> int:
        try:
            code = self.proc.wait(timeout)
            self._reader.join(10)
            return code
        except subprocess.TimeoutExpired:
            # What it printed says where it hung; the bare timeout would not (a story that
            # fails is read only from the suite's log).
            tail = "".join(self.lines[-40:])
            raise AssertionError(f"{' '.join(self.proc.args[-3:])} still running after "
                                 f"{timeout:.0f} s; its last lines:\n{tail}") from None
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class Sockets:
    """What a process tree listened on, sampled while it ran (Ray's processes come and go)."""

    listening: dict[tuple[str, int], str] = field(default_factory=dict)
    """(ip, port) -> process name and pid."""
    auth_modes: dict[str, str | None] = field(default_factory=dict)
    """RAY_AUTH_MODE in the environment of Ray's GCS and raylet (a local `ray.init` turns token
    authentication on by setting it, and every Ray process reads its mode from there)."""

    def sample_until_exit(self, proc: subprocess.Popen, every_s: float = 0.5) -> None:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            for process in _tree(root):
                try:
                    name = process.name()
                    for conn in process.net_connections(kind="inet"):
                        if conn.status == psutil.CONN_LISTEN:
                            self.listening[(conn.laddr.ip, conn.laddr.port)] = \
                                f"{name} (pid {process.pid})"
                    if name in ("gcs_server", "raylet"):
                        self.auth_modes[name] = process.environ().get("RAY_AUTH_MODE")
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
            time.sleep(every_s)


def _tree(root: psutil.Process) -> list[psutil.Process]:
    """`root` and every process under it (none once it has exited)."""
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is IPv4 loopback
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


@dataclass
class Stop:
    """A driver that was stopped, and what it left."""

    code: int
    """Its exit code."""
    output: str
    state: dict | None
    """search_state.json right after the stop."""
    runs: list
    """The MLflow runs right after the stop."""


@dataclass
class Story:
    """Stops and the resume that ended the search, as the tests read them."""

    folder: Path
    store: str
    stops: list[Stop]
    """The first driver's stop, then each stopped resume's, in order."""
    resume_code: int
    resumed: str
    """The last resume's output: the one that ended the search."""
    sockets: Sockets
    """What the first driver's process tree listened on (sampled only where asked)."""


def play(tmp_path: Path, env: dict[str, str], *, when=None, sample: bool = False,
         resume_codes: tuple[str, ...] = ()) -> Story:
    """Start the search and let `when` stop it; then run the printed resume command, first as
    each of `resume_codes` (drivers that stop themselves), then as the CLI itself. `env`: the
    environment the drivers start from."""
    from tests.conftest import make_npz, sqlite_store

    store = sqlite_store(tmp_path)
    spec = {"name": NAME, "data": make_npz(tmp_path / "tiny.npz"), "num_trials": TRIALS,
            "epochs": EPOCHS, "seed": 0, "space": {"width": [0.25, 0.5]},
            "baseline": "seeds", "output_dir": "runs", "tracking_uri": store,
            # Every trial trains (2 widths, 2 trials): these are about stops, not repeats.
            "rerun_duplicates": True, "profile": "off",
            "base": {"batch_size": 16, "patch_size": 12, "loader_workers": 0,
                     "workload": "tests.integration.faults:slow_classifier"}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    folder = tmp_path / "runs" / NAME
    driver = Driver("search", "--spec", "spec.yaml", cwd=tmp_path, env=env, when=when)
    sockets = Sockets()
    if sample:
        sockets.sample_until_exit(driver.proc)
    stops = [_stopped(driver, folder, store)]

    elsewhere = tmp_path / "elsewhere"  # the printed command works from any directory
    elsewhere.mkdir()
    for code in resume_codes:
        stops.append(_stopped(Driver("resume", str(folder), cwd=elsewhere, env=env, code=code),
                              folder, store))
    resume = Driver("resume", str(folder), cwd=elsewhere, env=env)
    resume_code = resume.finish()
    return Story(folder, store, stops, resume_code, resume.output, sockets)


def _stopped(driver: Driver, folder: Path, store: str) -> Stop:
    """Wait for `driver` to end; what it left in the search folder and in MLflow."""
    from mlflow.tracking import MlflowClient

    exit_code = driver.finish()
    state_file = folder / "search_state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else None
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name(NAME)
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    return Stop(exit_code, driver.output, state, runs)


STORIES: dict[str, Callable[[Path, dict[str, str]], Story]] = {
    "ctrl_c": lambda tmp, env: play(tmp, env, when=(("[baseline ", f"epoch 2/{EPOCHS}"),
                                                    lambda d: d.signal_group(signal.SIGINT)),
                                    resume_codes=(SIGNAL_IN_FINISH,)),
    "kill_9": lambda tmp, env: play(tmp, env, when=((f"[trial 2/{TRIALS} ", "start"),
                                                    lambda d: d.signal_group(signal.SIGKILL)),
                                    sample=True),
}


def play_all(tmp_dir: Callable[[str], Path], env: dict[str, str]) -> dict[str, Future]:
    """Every story at once, each in `tmp_dir(name)`, in the background: a test reads its story
    with `.result()`, which waits for it and raises what that story raised. The suite starts
    them with its first integration test (tests/conftest.py), so their drivers, which mostly
    wait on their own Rays, run beside the tests that use the session's. Their drivers start from `env`, not from whatever a
    test running meanwhile has set in this process's environment."""
    pool = ThreadPoolExecutor(len(STORIES))
    futures = {name: pool.submit(story, tmp_dir(name), env) for name, story in STORIES.items()}
    pool.shutdown(wait=False)
    return futures
